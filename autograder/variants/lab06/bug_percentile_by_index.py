"""Percentile by index into the sorted values, without the interpolation type 6 needs."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["interpolates_between_ranks", "p90_of_twenty_interpolates"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"`values` must be a non-empty list, got {values!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be in [0, 100], got {q!r}.")
    xs = sorted(values)
    return float(xs[min(len(xs) - 1, int(q / 100 * len(xs)))])   # BUG: an index, no interpolation
