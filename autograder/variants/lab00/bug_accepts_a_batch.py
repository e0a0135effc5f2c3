"""A plain loop that never checks the shape: a (2, V) batch is flattened by tolist()
into rows, compared as lists, and some id comes back instead of a ValueError."""
import math

EXPECT_FAIL = {"greedy_token_picks_argmax": ["non_1d_rejected"]}


def greedy_token(logits):
    values = logits.tolist()
    flat = [v for row in values for v in row] if values and isinstance(values[0], list) else values
    if any(math.isnan(v) for v in flat):
        raise ValueError("`logits` must not contain NaN.")
    best = 0
    for i, v in enumerate(values):   # BUG: no 1-D check
        if v > values[best]:
            best = i
    return best
