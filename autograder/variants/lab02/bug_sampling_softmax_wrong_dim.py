"""Softmax over dim=0 (the batch) instead of the vocabulary: each row's draw is then
weighted by how its logits compare with the OTHER rows'."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"sampled_frequencies_match_distribution": ["long_tail_chi_square", "alternating_rows_chi_square"],
               "sampling_uses_generator": ["rows_sample_their_own_distribution"]}


def sample_token(logits, generator):
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator, got {generator!r}.")
    probs = torch.softmax(logits, dim=0)         # BUG: dim=-1
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
