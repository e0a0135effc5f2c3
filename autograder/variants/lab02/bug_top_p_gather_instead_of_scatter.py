"""Computes the nucleus correctly in sorted order, then maps the mask back with gather
instead of scatter: the right number of tokens is kept, but at the wrong ids."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["crossing_token_kept", "matches_transformers"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    sorted_logits, idx = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs
    remove_sorted = before >= top_p
    remove_sorted[..., :min_tokens_to_keep] = False
    remove = remove_sorted.gather(-1, idx)      # BUG: scatter(-1, idx, remove_sorted) puts it back in place
    return logits.masked_fill(remove, -math.inf)
