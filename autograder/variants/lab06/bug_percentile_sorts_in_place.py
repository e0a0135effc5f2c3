"""The caller's list is sorted in place (values.sort()) instead of a sorted copy."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["median_of_five", "p90_of_twenty_interpolates", "p99_of_twenty_is_the_max",
                                     "q_0_and_100_are_min_and_max"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(f"`values` must be a non-empty list of numbers, got {values!r}.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"`values` must hold finite numbers only, got {v!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be a number in [0, 100], got {q!r}.")
    values.sort()   # BUG: sorts the caller's list, not a copy
    xs = values
    n = len(xs)
    h = (n + 1) * q / 100
    if h <= 1:
        return float(xs[0])
    if h >= n:
        return float(xs[-1])
    k = math.floor(h)
    return xs[k - 1] + (h - k) * (xs[k] - xs[k - 1])
