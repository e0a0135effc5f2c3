"""A correct solution written differently: a plain loop with a strict >, and the
shape checked through the tensor's size list."""
import math

EXPECT_FAIL = {}


def greedy_token(logits):
    if len(logits.size()) != 1:
        raise ValueError(f"`logits` must hold one row of V logits, got size {list(logits.size())}.")
    values = logits.tolist()
    if any(math.isnan(v) for v in values):
        raise ValueError("`logits` must not contain NaN.")
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best
