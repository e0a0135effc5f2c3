"""softmax as exp(x) / sum(exp(x)) without subtracting the max: exp(1009) and exp(1e4)
overflow float32 to inf, and inf / inf is NaN (exp(-5000) underflows to 0, and 0 / 0 is NaN)."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"softmax_is_stable": ["large_logits_no_overflow", "extreme_logits_1e4",
                                     "uniform_rows_exactly_uniform", "batch_shape_2_3_v"]}

_softmax = softmax   # the solution's, kept before it is replaced (log_softmax's +inf rows use it)


def softmax(logits):
    check_logits(logits)
    weights = torch.exp(logits)                                # BUG: no max subtracted
    return weights / weights.sum(dim=-1, keepdim=True)


def log_softmax(logits):   # the solution's, on the solution's softmax: the bug stays in softmax alone
    check_logits(logits)
    top = logits.amax(dim=-1, keepdim=True)
    inf_rows = torch.isposinf(top)
    centred = logits - torch.where(inf_rows, 0.0, top)
    log_norm = torch.log(torch.exp(centred).sum(dim=-1, keepdim=True))
    return torch.where(inf_rows, torch.log(_softmax(logits)), centred - log_norm)
