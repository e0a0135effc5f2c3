"""The Prometheus rule for a first edge <= 0 is applied in every bucket, not only the first: with
edges [0.0, 0.5, 1.0] every answer is 0.0."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["first_edge_at_or_below_zero"]}


def histogram_percentile(bucket_counts, boundaries, q):
    if len(bucket_counts) != len(boundaries) + 1:
        raise ValueError(f"`bucket_counts` must have len(boundaries) + 1 = {len(boundaries) + 1} entries, "
                         f"got {list(bucket_counts)!r}.")
    total = sum(bucket_counts)
    if total == 0:
        raise ValueError(f"`bucket_counts` must count at least one sample, got {list(bucket_counts)!r}.")
    rank = q / 100 * total
    before = 0
    for i, count in enumerate(bucket_counts):
        if count > 0 and before + count >= rank:
            if i == len(boundaries):
                return float(boundaries[-1])
            if boundaries[0] <= 0:         # BUG: only the first bucket has no lower edge
                return float(boundaries[0])
            lower = 0.0 if i == 0 else boundaries[i - 1]
            return lower + (boundaries[i] - lower) * (rank - before) / count
        before += count
    return float(boundaries[-1])
