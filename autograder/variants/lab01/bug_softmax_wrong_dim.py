"""Normalises over dim 0 instead of the last dimension: right for one vector, wrong for
any batch (each column sums to 1 instead of each row)."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"softmax_is_stable": ["uniform_rows_exactly_uniform", "pos_inf_takes_the_mass", "batch_shape_2_3_v"]}


def softmax(logits):
    check_logits(logits)
    e = torch.exp(logits - logits.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)
