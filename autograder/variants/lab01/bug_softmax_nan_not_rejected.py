"""A stable softmax with no input checks: NaN logits and all -inf rows come back as NaN
probabilities instead of a ValueError."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"softmax_is_stable": ["nan_rejected", "all_masked_row_rejected"]}


def softmax(logits):
    e = torch.exp(_ref._shifted(logits))
    return e / e.sum(dim=-1, keepdim=True)
