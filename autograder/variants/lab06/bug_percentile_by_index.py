"""Percentile by index into the sorted values, without the interpolation type 6 needs."""
from autograder.reference.lab06 import (bucket_counts, first_deviation, group_percentiles,  # noqa: F401
                                        histogram_percentile, percentile, request_metrics,
                                        spans_from_events, to_chrome_trace, trace_record)

EXPECT_FAIL = {"percentile_type_6": ["interpolates_between_ranks", "p90_of_twenty_interpolates"]}


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"`values` must be a non-empty list, got {values!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be in [0, 100], got {q!r}.")
    xs = sorted(values)
    return float(xs[min(len(xs) - 1, int(q / 100 * len(xs)))])
