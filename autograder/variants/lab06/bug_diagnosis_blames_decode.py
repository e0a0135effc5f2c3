"""Looks at end-to-end latency first and calls any slow completion a decode (TPOT)
problem: a queue or prefill incident is blamed on decode."""
from autograder.reference.lab06 import (bucket_counts, first_deviation, group_percentiles,  # noqa: F401
                                        histogram_percentile, percentile, request_metrics,
                                        spans_from_events, to_chrome_trace, trace_record)
from autograder.reference.lab06 import first_deviation as _right

EXPECT_FAIL = {"first_deviation_follows_the_table": ["diagnoses_queue_incident", "diagnoses_prefill_incident",
                                                     "diagnoses_kv_cache_incident", "queue_before_decode"]}


def first_deviation(baseline, incident, threshold=0.25):
    med = lambda rows: percentile([r["e2e"] for r in rows], 50)  # noqa: E731
    b, i = med(baseline), med(incident)
    if i - b > threshold * b + 0.005:
        return {"stage": "tpot", "metric": "e2e", "baseline": b, "incident": i}
    return _right(baseline, incident, threshold)
