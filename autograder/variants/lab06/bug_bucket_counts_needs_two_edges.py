"""bucket_counts refuses a single edge ("a histogram needs at least two edges"), though one edge
makes two buckets: v <= edge and the overflow."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["bucket_counts_with_one_edge"]}


def bucket_counts(values, boundaries):
    if len(boundaries) < 2:      # BUG: one edge is a valid histogram
        raise ValueError(f"`boundaries` must hold at least two edges, got {boundaries!r}.")
    counts = [0] * (len(boundaries) + 1)
    for v in values:
        i = 0
        while i < len(boundaries) and v > boundaries[i]:
            i += 1
        counts[i] += 1
    return counts
