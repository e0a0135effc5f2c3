"""Entropy with log2: the answer is in bits, not the nats the contract asks for."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"entropy_in_nats": ["uniform_is_log_v", "peaked_matches_reference", "zeros_from_masked_tokens",
                                   "batch_shape_2_3", "sum_within_tolerance_accepted"]}


def entropy(probs):
    return _ref.entropy(probs) / math.log(2)
