"""Subtracts the max but has no rule for +inf: inf - inf = NaN, so a row holding +inf
comes back as NaN instead of putting all its mass on the +inf token."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"softmax_is_stable": ["pos_inf_takes_the_mass"]}

_softmax = softmax   # the solution's, kept before it is replaced (log_softmax's +inf rows use it)


def softmax(logits):
    check_logits(logits)
    weights = torch.exp(logits - logits.amax(dim=-1, keepdim=True))   # BUG: inf - inf is NaN
    return weights / weights.sum(dim=-1, keepdim=True)


def log_softmax(logits):   # the solution's, on the solution's softmax: the bug stays in softmax alone
    check_logits(logits)
    top = logits.amax(dim=-1, keepdim=True)
    inf_rows = torch.isposinf(top)
    centred = logits - torch.where(inf_rows, 0.0, top)
    log_norm = torch.log(torch.exp(centred).sum(dim=-1, keepdim=True))
    return torch.where(inf_rows, torch.log(_softmax(logits)), centred - log_norm)
