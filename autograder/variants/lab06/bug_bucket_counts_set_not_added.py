"""`counts[i] = 1` instead of `+= 1`: a bucket says whether it was hit, not how many values it holds."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["two_values_in_one_bucket"]}


def bucket_counts(values, boundaries):
    counts = [0] * (len(boundaries) + 1)
    for v in values:
        i = 0
        while i < len(boundaries) and v > boundaries[i]:
            i += 1
        counts[i] = 1      # BUG: marks the bucket, does not count
    return counts
