"""`not q` treats q = 0 as a missing argument and rejects it: the 0th percentile (the smallest
value) raises instead, here and in every group_percentiles call that asks for it."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"percentile_type_6": ["q_0_is_the_min"], "group_percentiles_by_edges": ["q_0_is_each_groups_min"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(f"`values` must be a non-empty list of numbers, got {values!r}.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"`values` must hold finite numbers only, got {v!r}.")
    if not q or isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:   # BUG: 0 is falsy
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
