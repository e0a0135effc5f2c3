"""Correct percentile and histogram_percentile whose error messages are worded unlike the
solution's: each names the parameter and shows the value it got (the list, its length or the bad
entry), just not in the form "`name` must be ..., got value."."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"percentile needs samples, but values has {len(values or ())} of them")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"values[{i}] is {v}; every sample has to be a finite number")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or q < 0 or q > 100:
        raise ValueError(f"percentile rank q={q} lies outside 0..100")
    xs = sorted(values)
    h = (len(xs) + 1) * q / 100
    if h <= 1:
        return float(xs[0])
    if h >= len(xs):
        return float(xs[-1])
    k = math.floor(h)
    return xs[k - 1] + (h - k) * (xs[k] - xs[k - 1])


def histogram_percentile(bucket_counts, boundaries, q):
    if len(bucket_counts) != len(boundaries) + 1:
        raise ValueError(f"bucket_counts has {len(bucket_counts)} entries where {len(boundaries)} edges "
                         f"make {len(boundaries) + 1} buckets")
    total = sum(bucket_counts)
    if not total:
        raise ValueError(f"an empty histogram has no percentile (bucket_counts = {list(bucket_counts)})")
    rank, before = q / 100 * total, 0
    for i, count in enumerate(bucket_counts):
        if count and before + count >= rank:
            if i == len(boundaries):
                return float(boundaries[-1])
            if i == 0 and boundaries[0] <= 0:
                return float(boundaries[0])
            lower = boundaries[i - 1] if i else 0.0
            return lower + (boundaries[i] - lower) * (rank - before) / count
        before += count
    return float(boundaries[-1])
