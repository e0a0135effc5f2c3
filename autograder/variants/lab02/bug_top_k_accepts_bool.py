"""Checks top_k with isinstance(top_k, int) alone: True is an int in Python, so
top_k=True is taken as k = 1 instead of being rejected."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_k_keeps_k_largest": ["invalid_k_rejected"]}


def top_k_filter(logits, top_k):
    if not isinstance(top_k, int) or top_k < 1:      # BUG: a bool passes
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    k = min(top_k, logits.shape[-1])
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))
