"""Keeps exactly the k indices torch.topk returns: on a tie at the k-th value it drops tokens
the contract keeps (every token equal to the k-th largest value survives)."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_k_keeps_k_largest": ["ties_at_kth_value_all_kept"]}


def top_k_filter(logits, top_k):
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    k = min(top_k, logits.shape[-1])
    idx = torch.topk(logits, k, dim=-1).indices
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, idx, True)  # BUG: exactly k
    return logits.masked_fill(~keep, -math.inf)
