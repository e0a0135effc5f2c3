"""Looks at end-to-end latency first and calls any slow completion a decode (TPOT)
problem: a queue or prefill incident is blamed on decode."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"first_deviation_follows_the_table": ["diagnoses_queue_incident", "diagnoses_prefill_incident",
                                                     "diagnoses_kv_cache_incident", "queue_before_decode"]}


_right = first_deviation   # the solution's, kept before it is replaced


def first_deviation(baseline, incident, threshold=0.25):
    med = lambda rows: percentile([r["e2e"] for r in rows], 50)  # noqa: E731
    b, i = med(baseline), med(incident)
    if i - b > threshold * b + 0.005:
        return {"stage": "tpot", "metric": "e2e", "baseline": b, "incident": i}   # BUG: e2e checked first
    return _right(baseline, incident, threshold)
