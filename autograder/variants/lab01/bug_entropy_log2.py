"""Entropy with log2: the answer is in bits, not the nats the contract asks for."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"entropy_in_nats": ["uniform_is_log_v", "peaked_matches_reference", "zeros_from_masked_tokens",
                                   "batch_shape_2_3", "sum_within_tolerance_accepted"]}

_entropy_in_nats = entropy   # the solution's, kept before it is replaced


def entropy(probs):
    return _entropy_in_nats(probs) / math.log(2)   # BUG: bits
