"""Shifts the mask but compares with `>` instead of `>=`: when the running sum lands exactly
on p, the next token is kept too (3 tokens on top_p_exact_boundary instead of 2)."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["exact_boundary_keeps_two"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    cumsum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    remove = cumsum > top_p
    remove[..., 1:] = remove[..., :-1].clone()   # shift right: keep the crossing token ...
    remove[..., 0] = False                       # BUG: ... but a sum equal to p should end the nucleus
    remove[..., :min_tokens_to_keep] = False
    return logits.masked_fill(remove.scatter(-1, order, remove), -math.inf)
