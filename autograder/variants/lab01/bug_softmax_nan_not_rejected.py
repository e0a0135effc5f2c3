"""A stable softmax with no input checks: NaN logits and all -inf rows come back as NaN
probabilities instead of a ValueError."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"softmax_is_stable": ["nan_rejected", "all_masked_row_rejected"]}


def softmax(logits):
    # BUG: no check_logits(logits)
    top = logits.amax(dim=-1, keepdim=True)                    # (..., 1)
    inf_rows = torch.isposinf(top)                             # (..., 1) rows holding +inf
    limit = torch.where(torch.isposinf(logits), torch.zeros_like(logits), torch.full_like(logits, -math.inf))
    shifted = torch.where(inf_rows, limit, logits - torch.where(inf_rows, 0.0, top))
    weights = torch.exp(shifted)                               # (..., V), max entry 1
    return weights / weights.sum(dim=-1, keepdim=True)
