"""Values are checked to be numbers but not finite: a NaN in `values` is sorted somewhere and
gives a percentile instead of a ValueError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["rejects_non_finite_values"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(f"`values` must be a non-empty list of numbers, got {values!r}.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):   # BUG: NaN and inf pass
            raise ValueError(f"`values` must hold finite numbers only, got {v!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be a number in [0, 100], got {q!r}.")
    xs = sorted(values)
    n = len(xs)
    h = (n + 1) * q / 100
    if h <= 1:
        return float(xs[0])
    if h >= n:
        return float(xs[-1])
    k = math.floor(h)
    return xs[k - 1] + (h - k) * (xs[k] - xs[k - 1])
