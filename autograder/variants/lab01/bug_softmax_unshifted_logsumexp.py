"""softmax as exp(x - logsumexp(x)) on the raw logits. No overflow (torch.logsumexp is
stable), but in float32 logsumexp(x) ~ 1e4 is stored to about 0.001, so x - logsumexp(x)
loses digits: probabilities off by 1e-4 and equal logits of 5000 no longer give exactly 1/V."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"softmax_is_stable": ["extreme_logits_1e4", "uniform_rows_exactly_uniform"],
               "log_softmax_is_stable": ["extreme_logits_1e4", "uniform_rows_exactly_uniform"]}


def softmax(logits):
    return torch.exp(log_softmax(logits))


def log_softmax(logits):
    check_logits(logits)
    if torch.isposinf(logits).any():
        from autograder.reference.lab01 import log_softmax as exact  # the +inf rule is not the point here
        return exact(logits)
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)
