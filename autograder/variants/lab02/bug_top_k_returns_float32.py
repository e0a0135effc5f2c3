"""Builds the result from logits.float(), so float64 logits come back as float32 (the
contract keeps the input's dtype)."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_k_keeps_k_largest": ["input_not_modified_new_tensor"]}


def top_k_filter(logits, top_k):
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    x = logits.float()                                  # BUG: float64 in, float32 out
    k = min(top_k, x.shape[-1])
    kth_largest = torch.topk(x, k, dim=-1).values[..., -1:]
    return x.masked_fill(x < kth_largest, float("-inf"))
