"""Subtracts the max but has no rule for +inf: inf - inf = NaN, so a row holding +inf
comes back as NaN instead of putting all its mass on the +inf token."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"softmax_is_stable": ["pos_inf_takes_the_mass"]}


def softmax(logits):
    check_logits(logits)
    e = torch.exp(logits - logits.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
