"""The cut_off share counts only finish reason length: a cancelled answer, cut off just the same,
is not counted, and the cancellations show up as wrong answers instead."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"first_deviation_follows_the_table": ["cancelled_counts_as_cut_off"]}


def first_deviation(baseline, incident, threshold=0.25):
    def median(rows, metric):
        values = [r[metric] for r in rows if r[metric] is not None]
        return percentile(values, 50) if values else None

    def share(rows, metric):
        if metric == "cut_off":
            return sum(r["finish_reason"] == "length" for r in rows) / len(rows)   # BUG: cancelled too
        return sum(bool(r[metric]) for r in rows) / len(rows)

    for stage, metric, kind in CHECKS:
        if kind == "share":
            b, i = share(baseline, metric), share(incident, metric)
            if i - b > threshold:
                return {"stage": stage, "metric": metric, "baseline": b, "incident": i}
            continue
        b, i = median(baseline, metric), median(incident, metric)
        if b is None or i is None or i - b <= threshold * b + MIN_DELTA[kind]:
            continue
        if stage == "queue" and any(r["kv_blocks_peak"] >= r["kv_capacity"] for r in incident):
            used = lambda rows: max(r["kv_blocks_peak"] / r["kv_capacity"] for r in rows)  # noqa: E731
            return {"stage": "kv_cache", "metric": "kv_pool_used", "baseline": used(baseline), "incident": used(incident)}
        return {"stage": stage, "metric": metric, "baseline": b, "incident": i}
    return None
