"""Loops over rows but computes the nucleus size once, from the first row, and uses it for
every row: right for a (V,) input or a batch of identical rows, wrong for a real batch."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["batch_rows_get_own_cutoff", "matches_transformers"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if logits.dim() == 1:
        return top_p_filter(logits[None], top_p, min_tokens_to_keep)[0]
    if top_p == 1:
        return logits.clone()
    out = logits.clone()
    n_keep = None
    for row in range(logits.shape[0]):
        sorted_logits, order = torch.sort(logits[row], descending=True, stable=True)
        if n_keep is None:                       # BUG: the first row's cut-off, reused for all rows
            probs = torch.softmax(sorted_logits, dim=-1)
            before = torch.cat([torch.zeros(1), probs.cumsum(0)[:-1]])
            n_keep = max(int((before < top_p).sum()), min_tokens_to_keep)
        out[row, order[n_keep:]] = -math.inf
    return out
