"""Takes the cumulative sum in vocabulary order, without sorting by probability first."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["exact_boundary_keeps_two", "crossing_token_kept",
                                              "matches_transformers"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs        # BUG: the running sum of UNSORTED probabilities
    remove = before >= top_p
    remove[..., :min_tokens_to_keep] = False
    return logits.masked_fill(remove, -math.inf)
