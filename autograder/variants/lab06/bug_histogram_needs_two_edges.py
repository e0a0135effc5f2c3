"""histogram_percentile refuses a single edge, though one edge makes two buckets (v <= edge and the
overflow) and a percentile can be read from them."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["histogram_with_one_edge"]}


def histogram_percentile(bucket_counts, boundaries, q):
    if len(bucket_counts) != len(boundaries) + 1:
        raise ValueError(f"`bucket_counts` must have len(boundaries) + 1 = {len(boundaries) + 1} entries, "
                         f"got {list(bucket_counts)!r}.")
    if len(boundaries) < 2:      # BUG: one edge is a valid histogram
        raise ValueError(f"`boundaries` must hold at least two edges, got {boundaries!r}.")
    total = sum(bucket_counts)
    if total == 0:
        raise ValueError(f"`bucket_counts` must count at least one sample, got {list(bucket_counts)!r}.")
    rank = q / 100 * total
    before = 0
    for i, count in enumerate(bucket_counts):
        if count > 0 and before + count >= rank:
            if i == len(boundaries):
                return float(boundaries[-1])
            if i == 0 and boundaries[0] <= 0:
                return float(boundaries[0])
            lower = 0.0 if i == 0 else boundaries[i - 1]
            return lower + (boundaries[i] - lower) * (rank - before) / count
        before += count
    return float(boundaries[-1])
