"""Normalises over dim 0 instead of the last dimension: right for one vector, wrong for
any batch (each column sums to 1 instead of each row)."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"softmax_is_stable": ["uniform_rows_exactly_uniform", "pos_inf_takes_the_mass", "batch_shape_2_3_v"]}

_softmax = softmax   # the solution's, kept before it is replaced (log_softmax's +inf rows use it)


def softmax(logits):
    check_logits(logits)
    weights = torch.exp(logits - logits.amax(dim=0, keepdim=True))    # BUG: dim 0, not the last
    return weights / weights.sum(dim=0, keepdim=True)                 # BUG


def log_softmax(logits):   # the solution's, on the solution's softmax: the bug stays in softmax alone
    check_logits(logits)
    top = logits.amax(dim=-1, keepdim=True)
    inf_rows = torch.isposinf(top)
    centred = logits - torch.where(inf_rows, 0.0, top)
    log_norm = torch.log(torch.exp(centred).sum(dim=-1, keepdim=True))
    return torch.where(inf_rows, torch.log(_softmax(logits)), centred - log_norm)
