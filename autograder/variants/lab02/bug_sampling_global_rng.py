"""Calls torch.multinomial without the generator: the draw comes from the global RNG, so
the same seed does not give the same tokens and other code's random calls change them."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"sampling_uses_generator": ["same_seed_same_tokens", "generator_state_advances",
                                           "global_rng_not_used"]}


def sample_token(logits, generator):
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator, got {generator!r}.")
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1)[:, 0]     # BUG: generator=generator is missing
