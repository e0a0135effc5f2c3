"""Growth of exactly the threshold counts as a deviation (>= where the contract says "more than")."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"first_deviation_follows_the_table": ["growth_of_exactly_the_threshold_is_noise"]}


def first_deviation(baseline, incident, threshold=0.25):
    def median(rows, metric):
        values = [r[metric] for r in rows if r[metric] is not None]
        return percentile(values, 50) if values else None

    def share(rows, metric):
        if metric == "cut_off":
            return sum(r["finish_reason"] in ("length", "cancelled") for r in rows) / len(rows)
        return sum(bool(r[metric]) for r in rows) / len(rows)

    for stage, metric, kind in CHECKS:
        if kind == "share":
            b, i = share(baseline, metric), share(incident, metric)
            if i - b >= threshold:          # BUG: more than, not at least
                return {"stage": stage, "metric": metric, "baseline": b, "incident": i}
            continue
        b, i = median(baseline, metric), median(incident, metric)
        if b is None or i is None or i - b < threshold * b + MIN_DELTA[kind]:   # BUG: at least counts
            continue
        if stage == "queue" and any(r["kv_blocks_peak"] >= r["kv_capacity"] for r in incident):
            used = lambda rows: max(r["kv_blocks_peak"] / r["kv_capacity"] for r in rows)  # noqa: E731
            return {"stage": "kv_cache", "metric": "kv_pool_used", "baseline": used(baseline), "incident": used(incident)}
        return {"stage": stage, "metric": metric, "baseline": b, "incident": i}
    return None
