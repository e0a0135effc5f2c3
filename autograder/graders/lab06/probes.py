"""lab06's probes: they run in the student's process and return plain data. No reference here.

The inputs are the request sets of datasets/fixtures/trace_*.json (scripted requests on a
simulated clock). `build_spans` makes the OpenTelemetry spans a correct instrumentation
records, straight from a set's timelines; `rows_of` the diagnosis rows and `counters_of`
the counter samples of a set; `dump_spans` turns finished spans into plain data. The tests
build the same inputs with the same functions and hand them to the reference.

A probe is a public function whose first parameter is `ns` (the student's namespace); its
other arguments are plain values: set names, request ids, numbers.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache

from course.fixtures import FIXTURES_DIR

from autograder.checks import record
from autograder.core import function, raised

TOKENIZER = "tiny-model-bpe-512"
METRIC_KEYS = ("queue", "prefill", "ttft", "tpot", "itl", "e2e", "output_tokens")
OTHER_SETS = ("trace_noise_only", "trace_queue_incident", "trace_prefill_incident", "trace_tpot_incident",
              "trace_decode_rounds_incident", "trace_kv_cache_incident", "trace_cut_off_incident",
              "trace_not_latency_incident")
CALLED = ("percentile", "bucket_counts", "histogram_percentile")    # the functions `calls` may call


# ================================================================= request sets and spans

@lru_cache(maxsize=None)
def _set_text(name: str) -> str:
    return (FIXTURES_DIR / f"{name}.json").read_text(encoding="utf-8")


def request_set(name: str) -> dict:
    """A fresh copy of a lab06 request set."""
    return json.loads(_set_text(name))


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _provider():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def build_spans(name: str, ids=None) -> list:
    """OpenTelemetry spans of the requests `ids` (default all) of set `name`, built
    straight from the timelines: what a correct instrumentation records."""
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    rs = request_set(name)
    provider, exporter = _provider()
    tracer = provider.get_tracer("grader")
    arrive = {e["request_id"]: e["attributes"] for e in rs["events"] if e["event"] == "arrive"}
    end = {e["request_id"]: e.get("attributes") or {} for e in rs["events"] if e["event"] == "end"}
    for tl in rs["timelines"]:
        rid = tl["request_id"]
        if ids is not None and rid not in ids:
            continue
        attrs = {"gen_ai.operation.name": "text_completion", "gen_ai.provider.name": "course",
                 "course.request_id": rid, **arrive[rid]}
        root = tracer.start_span(f"text_completion {rs['model']}",
                                 context=trace.set_span_in_context(trace.INVALID_SPAN),
                                 attributes=attrs, start_time=_ns(tl["arrival"]))
        for i, t in enumerate(tl["tokens"]):
            root.add_event("token", {"course.token_index": i}, timestamp=_ns(t))
        ctx = trace.set_span_in_context(root)
        for k, (stage, a, b) in enumerate(tl["stages"]):
            span = tracer.start_span(stage, context=ctx, start_time=_ns(a))
            if tl["finish_reason"] == "error" and k == len(tl["stages"]) - 1:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=_ns(b))
        root.set_attributes({"gen_ai.response.finish_reasons": (tl["finish_reason"],),
                             "gen_ai.usage.output_tokens": len(tl["tokens"]), **end[rid]})
        if tl["finish_reason"] in ("cancelled", "timeout", "error"):
            root.set_attribute("course.cancel_time_s", float(tl["end"]))
        if tl["finish_reason"] == "error":
            root.set_attribute("error.type", end[rid].get("error.type") or "_OTHER")
            root.set_status(Status(StatusCode.ERROR))
        root.end(end_time=_ns(tl["end"]))
    return list(exporter.get_finished_spans())


def counters_of(name: str) -> list[dict]:
    return [{"name": e["name"], "time": e["time"], "value": e["value"]}
            for e in request_set(name)["events"] if e["event"] == "counter"]


def rows_of(name: str) -> list[dict]:
    """Diagnosis rows of a set, straight from its timelines (no spans involved)."""
    rs = request_set(name)
    scripts = {r["request_id"]: r for r in rs["requests"]}
    out = []
    for tl in rs["timelines"]:
        stage = {}
        for s, a, b in tl["stages"]:
            stage[s] = stage.get(s, 0.0) + (b - a)
        tok, n = tl["tokens"], len(tl["tokens"])
        out.append({"request_id": tl["request_id"], "input_tokens": scripts[tl["request_id"]]["input_tokens"],
                    "concurrency": tl["concurrency"], "queue": stage.get("queue"), "prefill": stage.get("prefill"),
                    "ttft": tok[0] - tl["arrival"] if n else None,
                    "tpot": (tok[-1] - tok[0]) / (n - 1) if n > 1 else None,
                    "e2e": tl["end"] - tl["arrival"], "output_tokens": n, "finish_reason": tl["finish_reason"],
                    "wrong": not (scripts[tl["request_id"]]["correct"] and tl["finish_reason"] == "stop"),
                    "kv_blocks_peak": tl["kv_blocks_peak"], "kv_capacity": rs["costs"]["kv_capacity"]})
    return out


def cut_share(rows: list[dict], share: float) -> list[dict]:
    """`rows` whose first `share` of requests end with length, the rest with stop."""
    k = round(share * len(rows))
    return [{**r, "finish_reason": "length" if i < k else "stop"} for i, r in enumerate(rows)]


def slow_decode(rows: list[dict]) -> list[dict]:
    """`rows` with every TPOT three times as long."""
    return [{**r, "tpot": None if r["tpot"] is None else r["tpot"] * 3} for r in rows]


def no_prefill(rows: list[dict]) -> list[dict]:
    """`rows` without a prefill time anywhere (a trace that does not record that stage)."""
    return [{**r, "prefill": None} for r in rows]


def half_cancelled(rows: list[dict]) -> list[dict]:
    """`rows` whose every other request (the first, third, ...) was cancelled, its output judged wrong."""
    return [{**r, "finish_reason": "cancelled", "wrong": True} if i % 2 == 0 else r for i, r in enumerate(rows)]


def tokens(n: int):
    """A change of rows: every request produced `n` output tokens."""
    return lambda rows: [{**r, "output_tokens": n} for r in rows]


TRANSFORMS = {None: lambda rows: rows, "slow_decode": slow_decode, "no_prefill": no_prefill,
              "first_row": lambda rows: rows[:1], "half_cancelled": half_cancelled,
              "cut_quarter": lambda rows: cut_share(rows, 0.25), "cut_half": lambda rows: cut_share(rows, 0.5),
              "tokens_8": tokens(8), "tokens_11": tokens(11)}


def _plain_attr(v):
    return list(v) if isinstance(v, tuple) else v


def dump_spans(spans) -> list[dict]:
    """ReadableSpans as plain data (ids as hex strings, times in ns)."""
    out = []
    for s in spans:
        out.append({
            "name": s.name, "trace_id": format(s.context.trace_id, "032x"),
            "span_id": format(s.context.span_id, "016x"),
            "parent_id": None if s.parent is None else format(s.parent.span_id, "016x"),
            "start_ns": s.start_time, "end_ns": s.end_time,
            "attributes": {k: _plain_attr(v) for k, v in (s.attributes or {}).items()},
            "events": [{"name": e.name, "time_ns": e.timestamp,
                        "index": _plain_attr((e.attributes or {}).get("course.token_index"))} for e in s.events],
            "status": s.status.status_code.name,
        })
    return out


def _call(fn, *args, **kwargs):
    """fn(*args, **kwargs), or the record of what it raised (the stub's NotImplementedError
    goes on: the harness reports the case as not implemented)."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


# ================================================================= probes

def spans(ns, name: str) -> dict:
    """spans_from_events(events of set `name`, a tracer): what it returned (None, "returned a
    value" or what it raised) and the dump of every span its tracer finished."""
    fn = function(ns, "spans_from_events")
    provider, exporter = _provider()
    try:
        out = fn(request_set(name)["events"], provider.get_tracer("student"))
    except NotImplementedError:
        raise
    except Exception as e:
        return {"result": raised(e), "spans": dump_spans(exporter.get_finished_spans())}
    return {"result": None if out is None else "returned a value", "spans": dump_spans(exporter.get_finished_spans())}


# a request that fails without naming its error's type: error.type is "_OTHER" (the conventions' fallback)
ERROR_WITHOUT_TYPE = [{"time": 0.0, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                      {"time": 0.1, "event": "stage", "request_id": "r0", "stage": "prefill"},
                      {"time": 0.2, "event": "token", "request_id": "r0"},
                      {"time": 0.2, "event": "stage", "request_id": "r0", "stage": "decode"},
                      {"time": 0.25, "event": "end", "request_id": "r0", "finish_reason": "error"}]
EVENT_LOGS = {"error_without_type": ERROR_WITHOUT_TYPE}


def spans_of_log(ns, name: str) -> dict:
    """`spans` on the event log EVENT_LOGS[name] instead of a request set's."""
    fn = function(ns, "spans_from_events")
    provider, exporter = _provider()
    try:
        out = fn(copy.deepcopy(EVENT_LOGS[name]), provider.get_tracer("student"))
    except NotImplementedError:
        raise
    except Exception as e:
        return {"result": raised(e), "spans": dump_spans(exporter.get_finished_spans())}
    return {"result": None if out is None else "returned a value", "spans": dump_spans(exporter.get_finished_spans())}


def spans_every_set(ns) -> list:
    """`spans` on every set of OTHER_SETS."""
    return [spans(ns, name) for name in OTHER_SETS]


# event logs that must be rejected: a token of a request that never arrived, one after its end
GHOST_TOKEN = [{"time": 0.0, "event": "token", "request_id": "ghost"}]
TOKEN_AFTER_END = [{"time": 0.0, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                   {"time": 0.1, "event": "stage", "request_id": "r0", "stage": "prefill"},
                   {"time": 0.2, "event": "token", "request_id": "r0"},
                   {"time": 0.2, "event": "end", "request_id": "r0", "finish_reason": "stop"},
                   {"time": 0.3, "event": "token", "request_id": "r0"}]

# a request id that arrives a second time: once while it is open, once after it has ended
ARRIVE_TWICE = [{"time": 0.0, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                {"time": 0.1, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                {"time": 0.2, "event": "end", "request_id": "r0", "finish_reason": "stop"}]
ARRIVE_AFTER_END = [{"time": 0.0, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                    {"time": 0.1, "event": "end", "request_id": "r0", "finish_reason": "cancelled"},
                    {"time": 0.2, "event": "arrive", "request_id": "r0", "attributes": {"gen_ai.request.model": "m"}},
                    {"time": 0.3, "event": "end", "request_id": "r0", "finish_reason": "stop"}]


def spans_arrive_again(ns) -> list:
    """spans_from_events on ARRIVE_TWICE and on ARRIVE_AFTER_END (what each returned or raised)."""
    fn = function(ns, "spans_from_events")
    return [_call(fn, copy.deepcopy(events), _provider()[0].get_tracer("student"))
            for events in (ARRIVE_TWICE, ARRIVE_AFTER_END)]


def spans_bad(ns):
    """spans_from_events on a token event of a request that never arrived."""
    fn = function(ns, "spans_from_events")
    provider, _ = _provider()
    return _call(fn, copy.deepcopy(GHOST_TOKEN), provider.get_tracer("student"))


def spans_after_end(ns):
    """spans_from_events on a token event of a request that has already ended."""
    fn = function(ns, "spans_from_events")
    provider, _ = _provider()
    return _call(fn, copy.deepcopy(TOKEN_AFTER_END), provider.get_tracer("student"))


def metrics(ns, name: str, ids: list) -> list:
    """request_metrics(spans of request rid of set `name`) for each rid in `ids`: the keys of
    METRIC_KEYS it returned, or what it raised."""
    fn = function(ns, "request_metrics")
    out = []
    for rid in ids:
        got = _call(fn, build_spans(name, {rid}))
        if isinstance(got, dict):
            got = {k: got.get(k) for k in METRIC_KEYS if k in got}
        out.append(got)
    return out


def metrics_two(ns):
    """request_metrics on the spans of two requests (r00 and r01 of trace_paths)."""
    return _call(function(ns, "request_metrics"), build_spans("trace_paths", {"r00", "r01"}))


def stages_only(name: str, rid: str) -> list:
    """The stage spans of request `rid` of set `name`, without their root."""
    return [s for s in build_spans(name, {rid}) if s.parent is not None]


def metrics_no_root(ns):
    """request_metrics on the stage spans of r00 of trace_paths without its root span."""
    return _call(function(ns, "request_metrics"), stages_only("trace_paths", "r00"))


def percentile_of(ns, values: list, q) -> dict:
    """percentile(a copy of values, q), and whether the list it was given kept its order."""
    fn = function(ns, "percentile")
    given = list(values)
    return {"result": _call(fn, given, q), "unchanged": given == list(values)}


NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def percentile_non_finite(ns, values: list, q) -> list:
    """checks.record of percentile(values, q) with "nan" / "inf" / "-inf" in `values` made floats."""
    fn = function(ns, "percentile")
    return [record(fn, ([NON_FINITE.get(v, v) if isinstance(v, str) else v for v in values], q))]


def calls(ns, fn_name: str, arg_lists: list) -> list:
    """checks.record of fn_name(*args) for each argument list (a fresh copy for every call)."""
    if fn_name not in CALLED:
        raise ValueError(f"`fn_name` must be one of {CALLED}, got {fn_name!r}.")
    fn = function(ns, fn_name)
    return [record(fn, tuple(copy.deepcopy(list(args)))) for args in arg_lists]


def groups(ns, name: str, by: str, edges: list, metric: str, qs=None):
    """group_percentiles(rows of set `name`, by, edges, metric[, qs])."""
    if qs is None:
        return _call(function(ns, "group_percentiles"), rows_of(name), by, list(edges), metric)
    return _call(function(ns, "group_percentiles"), rows_of(name), by, list(edges), metric, tuple(qs))


def deviation(ns, incident: str, transform=None):
    """first_deviation(rows of trace_baseline, rows of `incident`, changed by TRANSFORMS[transform])."""
    fn = function(ns, "first_deviation")
    return _call(fn, rows_of("trace_baseline"), TRANSFORMS[transform](rows_of(incident)))


def deviation_shares(ns, pairs: list) -> list:
    """first_deviation on the baseline rows cut off (finish reason length) at share b and at i,
    for each (b, i) of `pairs`."""
    fn = function(ns, "first_deviation")
    return [_call(fn, cut_share(rows_of("trace_baseline"), b), cut_share(rows_of("trace_baseline"), i))
            for b, i in pairs]


def deviation_pairs(ns, pairs: list) -> list:
    """first_deviation(TRANSFORMS[b](rows of trace_baseline), TRANSFORMS[i](rows of trace_baseline)) for each
    (b, i) of `pairs`."""
    fn = function(ns, "first_deviation")
    base = rows_of("trace_baseline")
    return [_call(fn, TRANSFORMS[b](copy.deepcopy(base)), TRANSFORMS[i](copy.deepcopy(base))) for b, i in pairs]


def trace_records(ns, name: str, ids: list) -> list:
    """trace_record(spans of request rid of set `name`, tokenizer_version=TOKENIZER) for each rid."""
    fn = function(ns, "trace_record")
    return [_call(fn, build_spans(name, {rid}), tokenizer_version=TOKENIZER) for rid in ids]


def chrome(ns, name: str):
    """to_chrome_trace(spans of every request of set `name`, its counter samples)."""
    return _call(function(ns, "to_chrome_trace"), build_spans(name), counters_of(name))
