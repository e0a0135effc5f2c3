"""A correct lab06 written unlike the solution: the event log is checked and split per request
first, then each request is replayed on its own (its spans end in another order than the
solution's); percentiles interpolate by a 0-based position with weights; histograms count with
cumulative "le" counts and find the bucket by bisecting them; medians come from statistics;
the Chrome export numbers tracks from a sorted list of roots and emits each request in one go."""
import bisect
import itertools
import math
import statistics

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

EXPECT_FAIL = {}

CUT_OFF = {"cancelled", "timeout", "error"}


def _ns(seconds):
    return int(round(seconds * 1e9))


def _split(events):
    """{request_id: its events, in log order}; ValueError for an event outside a request's life."""
    per_request, state = {}, {}
    for i, ev in enumerate(events):
        kind, rid = ev.get("event"), ev.get("request_id")
        if kind == "counter":
            continue
        if kind == "arrive":
            if rid in state:
                raise ValueError(f"`events[{i}]` arrives request {rid!r} a second time.")
            state[rid] = "open"
        elif state.get(rid) != "open":
            why = "after its end" if rid in state else "before it arrived"
            raise ValueError(f"`events[{i}]` is a {kind!r} event of request {rid!r} {why}.")
        elif kind == "end":
            state[rid] = "ended"
        per_request.setdefault(rid, []).append(ev)
    return per_request


def _replay(tracer, rid, evs):
    arrive = evs[0]
    attrs = {"gen_ai.operation.name": "text_completion", "gen_ai.provider.name": "course",
             "course.request_id": rid, **(arrive.get("attributes") or {})}
    root = tracer.start_span("text_completion " + attrs["gen_ai.request.model"],
                             context=trace.set_span_in_context(trace.INVALID_SPAN), attributes=attrs,
                             start_time=_ns(arrive["time"]))
    parent = trace.set_span_in_context(root)
    stages = [("queue", arrive["time"])] + [(e["stage"], e["time"]) for e in evs if e["event"] == "stage"]
    tokens = [e["time"] for e in evs if e["event"] == "token"]
    end = next(e for e in evs if e["event"] == "end")
    for index, t in enumerate(tokens):
        root.add_event("token", {"course.token_index": index}, timestamp=_ns(t))
    reason = end["finish_reason"]
    # each stage lasts until the next one starts; the last one until the request's end
    for k, ((name, start), (_, stop)) in enumerate(zip(stages, stages[1:] + [(None, end["time"])])):
        span = tracer.start_span(name, context=parent, start_time=_ns(start))
        if reason == "error" and k == len(stages) - 1:       # the stage the error interrupted
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(stop))
    extra = dict(end.get("attributes") or {})
    if reason in CUT_OFF:
        extra["course.cancel_time_s"] = float(end["time"])
    if reason == "error":
        extra.setdefault("error.type", "_OTHER")
        root.set_status(Status(StatusCode.ERROR))
    root.set_attributes({"gen_ai.response.finish_reasons": [reason], "gen_ai.usage.output_tokens": len(tokens),
                         **extra})
    root.end(end_time=_ns(end["time"]))


def spans_from_events(events, tracer):
    per_request = _split(events)
    for rid, evs in per_request.items():
        if evs[-1]["event"] != "end":
            continue            # still running at the end of the log: no ended spans to export
        _replay(tracer, rid, evs)


def request_metrics(spans):
    spans = list(spans)
    roots = [s for s in spans if s.parent is None]
    if len(roots) != 1:
        raise ValueError(f"`spans` must hold exactly one root span, got {len(roots)}.")
    (root,) = roots
    stage_ns = {}
    for s in spans:
        if s.parent is not None:
            stage_ns[s.name] = stage_ns.get(s.name, 0) + (s.end_time - s.start_time)
    ticks = sorted(e.timestamp for e in root.events if e.name == "token")
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(ticks)]
    return {
        "queue": stage_ns["queue"] / 1e9 if "queue" in stage_ns else None,
        "prefill": stage_ns["prefill"] / 1e9 if "prefill" in stage_ns else None,
        "ttft": (ticks[0] - root.start_time) / 1e9 if ticks else None,
        "tpot": (ticks[-1] - ticks[0]) / 1e9 / len(gaps) if gaps else None,
        "itl": gaps,
        "e2e": (root.end_time - root.start_time) / 1e9,
        "output_tokens": len(ticks),
    }


def percentile(values, q):
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        raise ValueError(f"`values` must be a non-empty list of numbers, got {values!r}.")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)]
    if bad:
        raise ValueError(f"`values` must hold finite numbers only, got {bad[0]!r}.")
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"`q` must be a number in [0, 100], got {q!r}.")
    xs = sorted(values)
    pos = min(max((len(xs) + 1) * q / 100 - 1, 0.0), len(xs) - 1)    # 0-based, clamped to the samples
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    w = pos - lo
    return float(xs[lo] * (1 - w) + xs[hi] * w) if w else float(xs[lo])


def bucket_counts(values, boundaries):
    # cumulative "le" counts, then differences (the way Prometheus stores a histogram)
    le = [sum(1 for v in values if v <= b) for b in boundaries] + [len(values)]
    return [c - p for c, p in zip(le, [0] + le[:-1])]


def histogram_percentile(bucket_counts, boundaries, q):
    if len(bucket_counts) != len(boundaries) + 1:
        raise ValueError(f"`bucket_counts` must have {len(boundaries) + 1} entries, got {list(bucket_counts)!r}.")
    cum = list(itertools.accumulate(bucket_counts))
    if cum[-1] == 0:
        raise ValueError(f"`bucket_counts` must count at least one sample, got {list(bucket_counts)!r}.")
    rank = q / 100 * cum[-1]
    i = bisect.bisect_left(cum, rank)
    while bucket_counts[i] == 0:         # only at rank 0: skip the empty buckets in front
        i += 1
    if i == len(boundaries):
        return float(boundaries[-1])
    if i == 0 and boundaries[0] <= 0:
        return float(boundaries[0])
    lower = boundaries[i - 1] if i > 0 else 0.0
    below = cum[i] - bucket_counts[i]
    return lower + (boundaries[i] - lower) * (rank - below) / bucket_counts[i]


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    edges = list(edges)
    if not edges or not all(a < b for a, b in itertools.pairwise(edges)):
        raise ValueError(f"`edges` must be strictly increasing, got {edges!r}.")
    bins = [[] for _ in range(len(edges) + 1)]
    for r in rows:
        if r[metric] is not None:
            bins[bisect.bisect_left(edges, r[by])].append(r[metric])
    lows, highs = [None] + edges, edges + [None]
    out = []
    for lo, hi, vals in zip(lows, highs, bins):
        group = {"lo": lo, "hi": hi, "n": len(vals)}
        group.update({f"p{q:g}": percentile(vals, q) if vals else None for q in qs})
        out.append(group)
    return out


def first_deviation(baseline, incident, threshold=0.25):
    def median(rows, key):
        vals = [r[key] for r in rows if r[key] is not None]
        return statistics.median(vals) if vals else None      # type 6 puts the median where everyone does

    def share(rows, key):
        hit = (lambda r: r["finish_reason"] in ("length", "cancelled")) if key == "cut_off" else (lambda r: r[key])
        return sum(map(bool, map(hit, rows))) / len(rows)

    checks = [("queue", "queue", median, 0.005), ("prefill", "prefill", median, 0.005),
              ("tpot", "tpot", median, 0.005), ("decode_rounds", "output_tokens", median, 1.0),
              ("finish_reason", "cut_off", share, None), ("not_latency", "wrong", share, None)]
    for stage, key, measure, min_delta in checks:
        b, i = measure(baseline, key), measure(incident, key)
        if b is None or i is None:
            continue
        limit = threshold if min_delta is None else threshold * b + min_delta
        if i - b <= limit:
            continue
        if stage == "queue" and any(r["kv_blocks_peak"] >= r["kv_capacity"] for r in incident):
            peak = lambda rows: max(r["kv_blocks_peak"] / r["kv_capacity"] for r in rows)  # noqa: E731
            return {"stage": "kv_cache", "metric": "kv_pool_used", "baseline": peak(baseline),
                    "incident": peak(incident)}
        return {"stage": stage, "metric": key, "baseline": b, "incident": i}
    return None


def trace_record(spans, *, tokenizer_version):
    m = request_metrics(spans)
    a = next(s for s in spans if s.parent is None).attributes
    fields = {"queue_s": "queue", "prefill_s": "prefill", "ttft_s": "ttft", "tpot_s": "tpot", "e2e_s": "e2e",
              "output_tokens": "output_tokens"}
    record = {"request_id": a["course.request_id"], "model": a["gen_ai.request.model"],
              "tokenizer_version": tokenizer_version, "input_tokens": a.get("gen_ai.usage.input_tokens"),
              "finish_reason": tuple(a["gen_ai.response.finish_reasons"])[0],
              "kv_cache": {"hit_tokens": a.get("course.kv_cache_hit_tokens"),
                           "released": a.get("course.kv_cache_released")},
              "cancel_time_s": a.get("course.cancel_time_s")}
    record.update({field: m[key] for field, key in fields.items()})
    return record


def to_chrome_trace(spans, counters=()):
    spans = list(spans)
    roots = sorted((s for s in spans if s.parent is None),
                   key=lambda s: (s.start_time, s.attributes["course.request_id"]))
    plain = lambda attrs: {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}  # noqa: E731
    events = []
    for tid, root in enumerate(roots, start=1):
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        mine.sort(key=lambda s: (s.start_time, s is not root, -s.end_time))
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": root.attributes["course.request_id"]}})
        for s in mine:
            events.append({"name": s.name, "ph": "X", "pid": 1, "tid": tid, "ts": s.start_time / 1000,
                           "dur": (s.end_time - s.start_time) / 1000, "args": plain(s.attributes)})
            events.extend({"name": e.name, "ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": e.timestamp / 1000,
                           "args": plain(e.attributes)} for e in s.events)
    events.extend({"name": c["name"], "ph": "C", "pid": 1, "ts": _ns(c["time"]) / 1000, "args": {"value": c["value"]}}
                  for c in counters)
    return {"traceEvents": events, "displayTimeUnit": "ms"}
