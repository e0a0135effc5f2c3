"""The caller's list is sorted in place (values.sort()) instead of a sorted copy."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["median_of_five", "p90_of_twenty_interpolates", "p99_of_twenty_is_the_max",
                                     "q_0_and_100_are_min_and_max"]}


def percentile(values, q):
    if not isinstance(values, list) or not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"`values` must be a non-empty list of finite numbers, got {values!r}.")
    if not 0 <= q <= 100:
        raise ValueError(f"`q` must be in [0, 100], got {q!r}.")
    values.sort()   # BUG: sorts the caller's list
    n, h = len(values), (len(values) + 1) * q / 100
    if h <= 1:
        return float(values[0])
    if h >= n:
        return float(values[-1])
    k = int(h)
    return values[k - 1] + (h - k) * (values[k] - values[k - 1])
