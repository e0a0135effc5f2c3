"""A correct lab06 written differently: a small replayer class with one method per event
kind, numpy's "weibull" percentile, bisect for buckets, a table-driven diagnosis, and a
Chrome export that walks spans once (their token instants with them) and assigns tracks lazily."""
import bisect
import math
from collections import defaultdict

import numpy as np
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

EXPECT_FAIL = {}


class _Replayer:
    def __init__(self, tracer):
        self.tracer = tracer
        self.roots, self.stages, self.counts = {}, {}, {}
        self.ended = set()

    @staticmethod
    def ns(seconds):
        return int(round(seconds * 1e9))

    def child(self, rid, name, t):
        ctx = trace.set_span_in_context(self.roots[rid])
        self.stages[rid] = self.tracer.start_span(name, context=ctx, start_time=self.ns(t))

    def on_arrive(self, ev):
        rid, attrs = ev["request_id"], dict(ev["attributes"])
        if rid in self.roots or rid in self.ended:
            raise ValueError(f"`events` starts request {rid!r} twice.")
        attrs.update({"gen_ai.operation.name": "text_completion", "gen_ai.provider.name": "course",
                      "course.request_id": rid})
        self.roots[rid] = self.tracer.start_span(f"text_completion {attrs['gen_ai.request.model']}",
                                                 context=trace.set_span_in_context(trace.INVALID_SPAN),
                                                 attributes=attrs, start_time=self.ns(ev["time"]))
        self.counts[rid] = 0
        self.child(rid, "queue", ev["time"])

    def on_stage(self, ev):
        self.stages[ev["request_id"]].end(end_time=self.ns(ev["time"]))
        self.child(ev["request_id"], ev["stage"], ev["time"])

    def on_token(self, ev):
        rid = ev["request_id"]
        self.roots[rid].add_event("token", {"course.token_index": self.counts[rid]}, timestamp=self.ns(ev["time"]))
        self.counts[rid] += 1

    def on_end(self, ev):
        rid, reason, end = ev["request_id"], ev["finish_reason"], self.ns(ev["time"])
        root, stage = self.roots.pop(rid), self.stages.pop(rid)
        self.ended.add(rid)
        failed = reason == "error"
        if failed:
            stage.set_status(Status(StatusCode.ERROR, "failed here"))
        stage.end(end_time=end)
        attrs = {"gen_ai.response.finish_reasons": (reason,), "gen_ai.usage.output_tokens": self.counts.pop(rid)}
        attrs.update(ev.get("attributes") or {})
        if reason in {"cancelled", "timeout", "error"}:
            attrs["course.cancel_time_s"] = float(ev["time"])
        if failed:
            attrs.setdefault("error.type", "_OTHER")
        root.set_attributes(attrs)
        if failed:
            root.set_status(Status(StatusCode.ERROR))
        root.end(end_time=end)

    def on_counter(self, ev):
        pass

    def feed(self, ev):
        kind = ev.get("event")
        if kind not in ("arrive", "counter") and ev.get("request_id") not in self.roots:
            raise ValueError(f"`events` has a {kind!r} event for a request that is not open: {ev.get('request_id')!r}.")
        getattr(self, f"on_{kind}")(ev)


def spans_from_events(events, tracer):
    replayer = _Replayer(tracer)
    for ev in events:
        replayer.feed(ev)


def request_metrics(spans):
    root, *more = [s for s in spans if s.parent is None] or [None]
    if root is None or more:
        raise ValueError(f"`spans` must hold one request's spans, got {len(more) + (root is not None)} roots.")
    per_stage = defaultdict(int)
    seen = set()
    for s in spans:
        if s is not root:
            per_stage[s.name] += s.end_time - s.start_time
            seen.add(s.name)
    ticks = np.array(sorted(e.timestamp for e in root.events if e.name == "token"), dtype=np.int64)
    gaps = np.diff(ticks) / 1e9
    return {
        "queue": per_stage["queue"] / 1e9 if "queue" in seen else None,
        "prefill": per_stage["prefill"] / 1e9 if "prefill" in seen else None,
        "ttft": float(ticks[0] - root.start_time) / 1e9 if ticks.size else None,
        "tpot": float(ticks[-1] - ticks[0]) / 1e9 / (ticks.size - 1) if ticks.size > 1 else None,
        "itl": [float(g) for g in gaps],
        "e2e": (root.end_time - root.start_time) / 1e9,
        "output_tokens": int(ticks.size),
    }


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0 or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise ValueError(f"`values` must be a non-empty list of finite numbers, got {values!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not (0 <= q <= 100):
        raise ValueError(f"`q` must be in [0, 100], got {q!r}.")
    return float(np.percentile(np.asarray(values, dtype=float), q, method="weibull"))


def bucket_counts(values, boundaries):
    out = [0] * (len(boundaries) + 1)
    for v in values:
        out[bisect.bisect_left(boundaries, v)] += 1
    return out


def histogram_percentile(bucket_counts, boundaries, q):
    if len(bucket_counts) != len(boundaries) + 1:
        raise ValueError(f"`bucket_counts` needs {len(boundaries) + 1} entries, got {bucket_counts!r}.")
    cumulative = np.cumsum(bucket_counts)
    if cumulative[-1] == 0:
        raise ValueError(f"`bucket_counts` is empty, got {bucket_counts!r}.")
    rank = q / 100 * cumulative[-1]
    for i, c in enumerate(bucket_counts):
        if c and cumulative[i] >= rank:
            break
    if i == len(boundaries):
        return float(boundaries[-1])
    if i == 0 and boundaries[0] <= 0:      # no lower edge to interpolate from (Prometheus)
        return float(boundaries[0])
    lo = boundaries[i - 1] if i else 0.0
    below = cumulative[i] - c
    return float(lo + (boundaries[i] - lo) * (rank - below) / c)


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    if not edges or sorted(set(edges)) != list(edges):
        raise ValueError(f"`edges` must be strictly increasing, got {edges!r}.")
    bins = defaultdict(list)
    for r in rows:
        if r[metric] is not None:
            bins[bisect.bisect_left(edges, r[by])].append(r[metric])
    bounds = [None] + list(edges) + [None]
    return [dict({"lo": bounds[i], "hi": bounds[i + 1], "n": len(bins[i])},
                 **{f"p{q:g}": (percentile(bins[i], q) if bins[i] else None) for q in qs})
            for i in range(len(edges) + 1)]


def first_deviation(baseline, incident, threshold=0.25):
    def med(rows, key):
        xs = [r[key] for r in rows if r[key] is not None]
        return percentile(xs, 50) if xs else None

    def frac(rows, test):
        return sum(1 for r in rows if test(r)) / len(rows)

    table = [
        ("queue", "queue", med, 0.005), ("prefill", "prefill", med, 0.005), ("tpot", "tpot", med, 0.005),
        ("decode_rounds", "output_tokens", med, 1.0),
        ("finish_reason", "cut_off",
         lambda rows, _: frac(rows, lambda r: r["finish_reason"] in ("length", "cancelled")), None),
        ("not_latency", "wrong", lambda rows, _: frac(rows, lambda r: r["wrong"]), None),
    ]
    for stage, metric, measure, floor in table:
        b, i = measure(baseline, metric), measure(incident, metric)
        if b is None or i is None:
            continue
        moved = (i - b > threshold) if floor is None else (i - b > threshold * b + floor)
        if not moved:
            continue
        if stage == "queue" and max(r["kv_blocks_peak"] - r["kv_capacity"] for r in incident) >= 0:
            return {"stage": "kv_cache", "metric": "kv_pool_used",
                    "baseline": max(r["kv_blocks_peak"] / r["kv_capacity"] for r in baseline),
                    "incident": max(r["kv_blocks_peak"] / r["kv_capacity"] for r in incident)}
        return {"stage": stage, "metric": metric, "baseline": b, "incident": i}
    return None


def trace_record(spans, *, tokenizer_version):
    root = next(s for s in spans if s.parent is None)
    m = request_metrics(spans)
    a = dict(root.attributes)
    record = {key: m[src] for key, src in (("queue_s", "queue"), ("prefill_s", "prefill"), ("ttft_s", "ttft"),
                                           ("tpot_s", "tpot"), ("e2e_s", "e2e"), ("output_tokens", "output_tokens"))}
    record.update(request_id=a["course.request_id"], model=a["gen_ai.request.model"],
                  tokenizer_version=tokenizer_version, input_tokens=a["gen_ai.usage.input_tokens"],
                  finish_reason=list(a["gen_ai.response.finish_reasons"])[0],
                  kv_cache={"hit_tokens": a.get("course.kv_cache_hit_tokens"),
                            "released": a.get("course.kv_cache_released")},
                  cancel_time_s=a.get("course.cancel_time_s"))
    return record


def to_chrome_trace(spans, counters=()):
    roots = sorted((s for s in spans if s.parent is None),
                   key=lambda s: (s.start_time, s.attributes["course.request_id"]))
    tid_of = {r.context.trace_id: i + 1 for i, r in enumerate(roots)}
    meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid_of[r.context.trace_id],
             "args": {"name": r.attributes["course.request_id"]}} for r in roots]
    xs = []
    for s in spans:
        tid = tid_of[s.context.trace_id]
        xs.append(((s.start_time, s.parent is not None, -s.end_time),
                   {"name": s.name, "ph": "X", "pid": 1, "tid": tid, "ts": s.start_time / 1e3,
                    "dur": (s.end_time - s.start_time) / 1e3,
                    "args": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.attributes.items()}}))
        for e in s.events:      # token instants sort right after their span
            xs.append(((s.start_time, s.parent is not None, -s.end_time),
                       {"name": e.name, "ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": e.timestamp / 1e3,
                        "args": dict(e.attributes)}))
    xs.sort(key=lambda pair: pair[0])
    cs = [{"name": c["name"], "ph": "C", "pid": 1, "ts": round(c["time"] * 1e9) / 1e3, "args": {"value": c["value"]}}
          for c in counters]
    return {"traceEvents": meta + [x for _, x in xs] + cs, "displayTimeUnit": "ms"}
