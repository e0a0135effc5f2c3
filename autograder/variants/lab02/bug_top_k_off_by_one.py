"""Uses the (k+1)-th largest value as the threshold, so k+1 tokens survive."""
import math

import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_k_keeps_k_largest": ["keeps_k_largest", "one_keeps_only_the_max", "matches_transformers"]}


def top_k_filter(logits, top_k):
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    sorted_logits = torch.sort(logits, dim=-1, descending=True).values
    k = min(top_k, logits.shape[-1] - 1)
    threshold = sorted_logits[..., k:k + 1]      # BUG: index k is the (k+1)-th largest
    return logits.masked_fill(logits < threshold, -math.inf)
