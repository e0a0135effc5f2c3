"""softmax as exp(x - logsumexp(x)) on the raw logits. No overflow (torch.logsumexp is
stable), but in float32 logsumexp(x) ~ 1e4 is stored to about 0.001, so x - logsumexp(x)
loses digits: probabilities off by 1e-4 and equal logits of 5000 no longer give exactly 1/V."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"softmax_is_stable": ["extreme_logits_1e4", "uniform_rows_exactly_uniform"],
               "log_softmax_is_stable": ["extreme_logits_1e4", "uniform_rows_exactly_uniform"]}

_softmax = softmax   # the solution's, kept before it is replaced
_log_softmax = log_softmax


def softmax(logits):
    if isinstance(logits, torch.Tensor) and torch.isposinf(logits).any():
        return _softmax(logits)                                # the +inf rule is not the point here
    return torch.exp(log_softmax(logits))


def log_softmax(logits):
    check_logits(logits)
    if torch.isposinf(logits).any():
        return _log_softmax(logits)                            # the +inf rule is not the point here
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)   # BUG: not shifted by the max first
