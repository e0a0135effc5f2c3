"""Computes probabilities as exp(logits) / sum: logits near 1e4 (or just + 100) overflow to
inf, inf / inf is NaN, and the nucleus comes out wrong."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["extreme_logits"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    e = torch.exp(sorted_logits)                 # BUG: no max subtraction
    probs = e / e.sum(dim=-1, keepdim=True)
    before = torch.cat([torch.zeros_like(probs[..., :1]), probs.cumsum(dim=-1)[..., :-1]], dim=-1)
    remove = before >= top_p
    remove[..., :min_tokens_to_keep] = False
    return logits.masked_fill(remove.scatter(-1, order, remove), -math.inf)
