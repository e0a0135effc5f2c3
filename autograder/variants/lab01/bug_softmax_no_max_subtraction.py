"""softmax as exp(x) / sum(exp(x)) without subtracting the max: exp(1009) and exp(1e4)
overflow float32 to inf, and inf / inf is NaN (exp(-5000) underflows to 0, and 0 / 0 is NaN)."""
from autograder.reference.lab01 import *  # noqa: F401,F403  (everything else is correct)

EXPECT_FAIL = {"softmax_is_stable": ["large_logits_no_overflow", "extreme_logits_1e4",
                                     "uniform_rows_exactly_uniform", "batch_shape_2_3_v"]}


def softmax(logits):
    check_logits(logits)
    e = torch.exp(logits)
    return e / e.sum(dim=-1, keepdim=True)
