"""Percentile by index into the sorted values, without the interpolation type 6 needs."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["interpolates_between_ranks", "p90_of_twenty_interpolates"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(f"`values` must be a non-empty list of numbers, got {values!r}.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"`values` must hold finite numbers only, got {v!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be a number in [0, 100], got {q!r}.")
    xs = sorted(values)
    return float(xs[min(len(xs) - 1, int(q / 100 * len(xs)))])   # BUG: an index, no interpolation
