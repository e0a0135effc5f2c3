"""The first bucket interpolates from 0 even when its upper edge is below 0, so the answer lies
outside the bucket (above its upper edge) instead of being boundaries[0]."""

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
            lower = 0.0 if i == 0 else boundaries[i - 1]
            return lower + (boundaries[i] - lower) * (rank - before) / count
        before += count
    return float(boundaries[-1])
