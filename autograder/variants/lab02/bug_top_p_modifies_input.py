"""Correct nucleus, but written into the caller's tensor with masked_fill_ (in place)."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["exact_boundary_keeps_two", "input_not_modified_new_tensor"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs
    remove = before >= top_p
    remove[..., :min_tokens_to_keep] = False
    return logits.masked_fill_(remove.scatter(-1, order, remove), -math.inf)  # BUG: in place
