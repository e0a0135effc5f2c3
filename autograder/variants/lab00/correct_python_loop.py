"""A correct solution written differently: a plain loop with a strict >."""
import math

EXPECT_FAIL = {}


def greedy_token(logits):
    values = logits.tolist()
    if any(math.isnan(v) for v in values):
        raise ValueError("`logits` must not contain NaN.")
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best
