"""Graders for lab06 (spans and latency breakdowns).

Graded API (the docstrings of the stubs in solutions/lab06 are the contract):
  spans_from_events(events, tracer) -> None           spans land in the tracer's exporter
  request_metrics(spans) -> {"queue", "prefill", "ttft", "tpot", "itl", "e2e", "output_tokens"}
  percentile(values, q) -> float                      Hyndman-Fan type 6 (numpy "weibull")
  bucket_counts(values, boundaries) -> list[int]      "le" buckets + overflow
  histogram_percentile(bucket_counts, boundaries, q) -> float    like Prometheus histogram_quantile
  group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)) -> list[dict]
  first_deviation(baseline, incident, threshold=0.25) -> dict | None
  trace_record(spans, *, tokenizer_version) -> dict   valid under datasets/schemas/trace_record.schema.json
  to_chrome_trace(spans, counters=()) -> {"traceEvents": [...]}

Inputs come from the request sets in datasets/fixtures/trace_*.json (scripted requests
on a simulated clock, times to the microsecond). Probes build OpenTelemetry spans in the
student's process with the grader's own span builder (`build_spans`, from the sets'
timelines) or hand the student a tracer whose in-memory exporter they never see, and
return plain dumps; judges recompute everything with autograder/reference/lab06.py
(course.tracing) on the same inputs.

Contract coverage:
  spans_from_events   span tree, times to the us, GenAI attributes (operation text_completion,
                      provider, error.type), token events, cancel time, error status, requests
                      cancelled in the queue, one trace per request
  request_metrics     TTFT from arrival, TPOT over n - 1 gaps, None for one token / no token,
                      stages never reached are None, ITL list, one request only
  percentile          type 6 interpolation, small-sample tail = max, ties, one sample, input
                      left unsorted, bad q / empty / NaN rejected
  buckets             a value on an edge belongs to that edge's bucket, overflow bucket,
                      interpolation inside a bucket, first bucket from 0, overflow -> last edge
  group_percentiles   edges inclusive above, empty group n=0 and None, None values skipped
  first_deviation     every incident set, the first stage wins, noise is no deviation, a share
                      deviates by its absolute growth (not relative to the baseline share)
  trace_record        schema-valid and equal to the reference on every ending
  to_chrome_trace     us units, one named track per request, nesting on each track, counters
"""
from __future__ import annotations

import json
import math
from functools import lru_cache

from course.fixtures import FIXTURES_DIR

from ..checks import Input, call_probe, rejects_case, result_of
from ..core import Case, Fail, Test, describe, function, is_raised, raised
from ..reference import lab06 as ref

LAB = "lab06"
TOKENIZER = "tiny-model-bpe-512"

API = {
    "spans_from_events": "(events, tracer)",
    "request_metrics": "(spans)",
    "percentile": "(values, q)",
    "bucket_counts": "(values, boundaries)",
    "histogram_percentile": "(bucket_counts, boundaries, q)",
    "group_percentiles": "(rows, by, edges, metric, qs=(50, 95, 99))",
    "first_deviation": "(baseline, incident, threshold=0.25)",
    "trace_record": "(spans, *, tokenizer_version)",
    "to_chrome_trace": "(spans, counters=())",
}


# ---------------------------------------------------------------- request sets and spans

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
            "events": [{"name": e.name, "time_ns": e.timestamp} for e in s.events],
            "status": s.status.status_code.name,
        })
    return out


def _us(ns) -> int:
    return int(round(ns / 1000))


def view(dump: list[dict]) -> dict:
    """{request_id: what the judges compare} from a span dump; raises Fail on a broken tree."""
    roots = [s for s in dump if s["parent_id"] is None]
    out = {}
    for root in roots:
        rid = root["attributes"].get("course.request_id")
        if not isinstance(rid, str):
            raise Fail("a root span has no `course.request_id` attribute", got=root["attributes"],
                       hint="Put the request id on the root span as attributes['course.request_id'].")
        if rid in out:
            raise Fail(f"request {rid!r} has more than one root span", hint="One root span per request; its "
                       "stages are children of it (pass the root's context as their parent).")
        kids = [s for s in dump if s["parent_id"] == root["span_id"]]
        if any(k["trace_id"] != root["trace_id"] for k in kids):
            raise Fail(f"a stage of {rid!r} is in another trace than its root")
        out[rid] = {
            "root": [root["name"], _us(root["start_ns"]), _us(root["end_ns"])],
            "stages": sorted([k["name"], _us(k["start_ns"]), _us(k["end_ns"])] for k in kids),
            "tokens": sorted(_us(e["time_ns"]) for e in root["events"] if e["name"] == "token"),
            "attributes": root["attributes"], "status": root["status"],
            "stage_status": {k["name"]: k["status"] for k in kids}, "trace_id": root["trace_id"],
        }
    orphans = [s["name"] for s in dump if s["parent_id"] is not None
               and not any(s["parent_id"] == r["span_id"] for r in roots)]
    if orphans:
        raise Fail(f"spans {orphans[:5]} have a parent that is not a request's root span",
                   hint="Every stage span is a child of its request's root span \"text_completion {model}\".")
    return out


# ================================================================= spans_from_events

def _probe_spans(name, *, cut=None):
    def probe(ns):
        fn = function(ns, "spans_from_events")
        provider, exporter = _provider()
        events = request_set(name)["events"]
        if cut is not None:
            events = cut(events)
        try:
            out = fn(events, provider.get_tracer("student"))
        except NotImplementedError:
            raise
        except Exception as e:
            return {"result": raised(e), "spans": dump_spans(exporter.get_finished_spans())}
        return {"result": None if out is None else "returned a value",
                "spans": dump_spans(exporter.get_finished_spans())}
    return probe


def _spans_view(obs):
    if is_raised(obs["result"]):
        r = obs["result"]
        raise Fail(f"spans_from_events raised {r['__raised__']}: {r['message']}", got=describe(r))
    return view(obs["spans"])


ATTRS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.request.temperature",
         "gen_ai.request.top_p", "gen_ai.request.max_tokens", "gen_ai.usage.input_tokens",
         "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "error.type", "course.request_id",
         "course.cancel_time_s")


def _judge_spans(name, aspects, hint):
    def judge(obs):
        got = _spans_view(obs)
        expected = view(dump_spans(ref.expected_spans(request_set(name)["events"])))
        missing = sorted(set(expected) - set(got))
        if missing:
            raise Fail(f"no finished root span for requests {missing[:5]}", expected=sorted(expected),
                       got=sorted(got), hint="End every root span (span.end(end_time=...)): only ended spans are "
                                             "exported. Cancelled, timed-out and failed requests too.")
        for rid in sorted(expected):
            e, g = expected[rid], got[rid]
            if "tree" in aspects:
                if g["root"] != e["root"]:
                    raise Fail(f"the root span of {rid!r} (name, start us, end us) is wrong", expected=e["root"],
                               got=g["root"], hint=hint)
                if g["stages"] != e["stages"]:
                    raise Fail(f"the stage spans of {rid!r} (name, start us, end us) are wrong",
                               expected=e["stages"], got=g["stages"], hint=hint)
            if "tokens" in aspects and g["tokens"] != e["tokens"]:
                raise Fail(f"the \"token\" events of {rid!r} (us) are wrong", expected=e["tokens"], got=g["tokens"],
                           hint="One event named \"token\" on the root span per output token, with the token's time.")
            if "attributes" in aspects:
                for key in ATTRS:
                    ev, gv = e["attributes"].get(key), g["attributes"].get(key)
                    if ev != gv and not (isinstance(ev, float) and isinstance(gv, (int, float))
                                         and math.isclose(ev, gv, abs_tol=1e-6)):
                        raise Fail(f"attribute {key!r} of the root span of {rid!r} is wrong", expected=ev, got=gv,
                                   hint=hint)
            if "status" in aspects:
                if g["status"] != e["status"]:
                    raise Fail(f"the status of the root span of {rid!r} is wrong", expected=e["status"],
                               got=g["status"], hint="A request that ends with finish reason error gets status "
                                                     "ERROR (span.set_status(StatusCode.ERROR)).")
        if "traces" in aspects and len({g["trace_id"] for g in got.values()}) != len(got):
            raise Fail("several requests share one trace", hint="Start each root span in a fresh context "
                       "(context=trace.set_span_in_context(trace.INVALID_SPAN)) so it begins its own trace.")
    return judge


def _probe_spans_bad(ns):
    fn = function(ns, "spans_from_events")
    provider, _ = _provider()
    events = [{"time": 0.0, "event": "token", "request_id": "ghost"}]
    try:
        return fn(events, provider.get_tracer("student"))
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


def _must_value_error(obs, what):
    if not is_raised(obs) or not obs["is_value_error"]:
        raise Fail(f"should raise ValueError for {what}", expected="ValueError", got=describe(obs),
                   hint="Check each event before using it and raise ValueError saying what is wrong.")


OTHER_SETS = ("trace_noise_only", "trace_queue_incident", "trace_prefill_incident", "trace_tpot_incident",
              "trace_decode_rounds_incident", "trace_kv_cache_incident", "trace_cut_off_incident",
              "trace_not_latency_incident")


def _probe_every_set(ns):
    return [_probe_spans(name)(ns) for name in OTHER_SETS]


def _judge_every_set(obs):
    for name, one in zip(OTHER_SETS, obs):
        _judge_spans(name, {"tree", "tokens", "attributes"}, _TREE_HINT)(one)


_TREE_HINT = ("Each stage span starts at its event's time and ends when the next stage starts or the request "
              "ends; pass times as start_time / end_time in integer nanoseconds (round(t * 1e9)).")
_CUT_HINT = ("When a request ends (any finish reason) end its open stage span AND its root at the end event's "
             "time; for cancelled, timeout and error record course.cancel_time_s.")

SPANS = Test(LAB, "spans_from_events_builds_the_tree",
             "spans_from_events: one root per request, stage children, token events, every ending closes every span", (
    Case("paths_span_tree", 2, _probe_spans("trace_paths"), _judge_spans("trace_paths", {"tree"}, _TREE_HINT),
         visible=True, fixture="trace_paths"),
    Case("paths_attributes", 2, _probe_spans("trace_paths"),
         _judge_spans("trace_paths", {"attributes"}, "The root gets gen_ai.operation.name \"text_completion\", "
                      "gen_ai.provider.name \"course\" and the arrive event's attributes; at the end set "
                      "gen_ai.response.finish_reasons (a list), gen_ai.usage.output_tokens, the end event's "
                      "attributes (error.type of a failed request among them), and course.cancel_time_s for "
                      "cancelled / timeout / error."), fixture="trace_paths"),
    Case("paths_token_events", 1, _probe_spans("trace_paths"), _judge_spans("trace_paths", {"tokens"}, None),
         fixture="trace_paths"),
    Case("error_sets_status", 1, _probe_spans("trace_paths"), _judge_spans("trace_paths", {"status"}, None),
         fixture="trace_paths"),
    Case("cancelled_while_queued", 2, _probe_spans("trace_queue_cancel"),
         _judge_spans("trace_queue_cancel", {"tree", "attributes"}, _CUT_HINT), fixture="trace_queue_cancel"),
    Case("mixed_set_every_span", 2, _probe_spans("trace_mixed"),
         _judge_spans("trace_mixed", {"tree", "tokens", "attributes", "status"}, _CUT_HINT), fixture="trace_mixed"),
    Case("every_other_request_set", 1, _probe_every_set, _judge_every_set),
    Case("one_trace_per_request", 1, _probe_spans("trace_baseline"),
         _judge_spans("trace_baseline", {"traces", "tree"}, _TREE_HINT), fixture="trace_baseline"),
    Case("rejects_token_of_unknown_request", 1, _probe_spans_bad,
         lambda obs: _must_value_error(obs, "a token event of a request that never arrived")),
))


# ================================================================= request_metrics

METRIC_KEYS = ("queue", "prefill", "ttft", "tpot", "itl", "e2e", "output_tokens")


def _probe_metrics(name, ids):
    def probe(ns):
        fn = function(ns, "request_metrics")
        out = []
        for rid in ids:
            spans = build_spans(name, {rid})
            try:
                got = fn(spans)
            except NotImplementedError:
                raise
            except Exception as e:
                got = raised(e)
            if isinstance(got, dict):
                got = {k: got.get(k) for k in METRIC_KEYS if k in got}
            out.append(got)
        return out
    return probe


def _same(e, g, tol=1e-9):
    if e is None or g is None:
        return e is None and g is None
    if isinstance(e, list):
        return isinstance(g, list) and len(e) == len(g) and all(_same(a, b, tol) for a, b in zip(e, g))
    return isinstance(g, (int, float)) and not isinstance(g, bool) and math.isclose(e, g, rel_tol=1e-9, abs_tol=tol)


_METRIC_HINTS = {
    "ttft": "TTFT = first token time - ARRIVAL (the root span's start), queue included; None without tokens.",
    "tpot": "TPOT = (last token - first token) / (n - 1); None for fewer than two tokens.",
    "itl": "ITL is the list of the n - 1 gaps between consecutive token times.",
    "queue": "queue / prefill: the summed durations of those stage spans; None if the request never reached it.",
    "prefill": "queue / prefill: the summed durations of those stage spans; None if the request never reached it.",
    "e2e": "e2e = the root span's end - its start.",
    "output_tokens": "output_tokens = the number of \"token\" events on the root.",
}


def _judge_metrics(name, ids, keys=METRIC_KEYS):
    def judge(obs):
        for rid, got in zip(ids, obs):
            got = result_of({"result": got}, f"request_metrics(<spans of {rid}>)")
            expected = ref.request_metrics(build_spans(name, {rid}))
            if not isinstance(got, dict):
                raise Fail("request_metrics should return a dict", expected=sorted(expected), got=describe(got))
            for key in keys:
                if key not in got:
                    raise Fail(f"the result has no key {key!r}", expected=sorted(expected), got=sorted(got))
                if not _same(expected[key], got[key]):
                    raise Fail(f"`{key}` of request {rid!r} is wrong", expected=expected[key], got=got[key],
                               hint=_METRIC_HINTS[key])
    return judge


def _probe_metrics_two(ns):
    fn = function(ns, "request_metrics")
    try:
        return fn(build_spans("trace_paths", {"r00", "r01"}))
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


_ALL_MIXED = tuple(f"r{i:02d}" for i in range(40))

METRICS = Test(LAB, "request_metrics_from_spans",
               "request_metrics: queue, prefill, TTFT from arrival, TPOT over n - 1 gaps, ITL, e2e, tokens", (
    Case("stop_request", 2, _probe_metrics("trace_paths", ("r00",)), _judge_metrics("trace_paths", ("r00",)),
         visible=True, fixture="trace_paths"),
    Case("ttft_includes_the_queue", 2, _probe_metrics("trace_queue_cancel", ("r02", "r03", "r04")),
         _judge_metrics("trace_queue_cancel", ("r02", "r03", "r04"), ("queue", "ttft")), fixture="trace_queue_cancel"),
    Case("tpot_over_n_minus_1_gaps", 2, _probe_metrics("trace_baseline", ("r00", "r05", "r11")),
         _judge_metrics("trace_baseline", ("r00", "r05", "r11"), ("tpot", "itl")), fixture="trace_baseline"),
    Case("one_token_has_no_tpot", 1, _probe_metrics("trace_paths", ("r07",)), _judge_metrics("trace_paths", ("r07",)),
         fixture="trace_paths"),
    Case("no_token_no_ttft", 1, _probe_metrics("trace_paths", ("r02", "r05")),
         _judge_metrics("trace_paths", ("r02", "r05")), fixture="trace_paths"),
    Case("cancelled_in_queue_never_prefilled", 1, _probe_metrics("trace_queue_cancel", ("r05",)),
         _judge_metrics("trace_queue_cancel", ("r05",)), fixture="trace_queue_cancel"),
    Case("every_request_of_the_mixed_set", 2, _probe_metrics("trace_mixed", _ALL_MIXED),
         _judge_metrics("trace_mixed", _ALL_MIXED), fixture="trace_mixed"),
    Case("rejects_spans_of_two_requests", 1, _probe_metrics_two,
         lambda obs: _must_value_error(obs, "the spans of two requests")),
))


# ================================================================= percentiles

def _probe_percentile(values, q):
    def probe(ns):
        fn = function(ns, "percentile")
        given = list(values)
        try:
            out = fn(given, q)
        except NotImplementedError:
            raise
        except Exception as e:
            out = raised(e)
        return {"result": out, "unchanged": given == list(values)}
    return probe


def _judge_percentile(values, q, hint):
    def judge(obs):
        call = f"percentile({values!r}, {q!r})"
        got = result_of(obs, call, hint)
        expected = ref.percentile(list(values), q)
        if not _same(expected, got):
            raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
        if not obs["unchanged"]:
            raise Fail(f"{call} reordered the list it was given",
                       hint="Sort a copy (sorted(values)), never the caller's list in place.")
    return judge


_TYPE6 = ("Type 6: rank h = (n + 1) * q / 100 (1-based); below 1 -> the smallest value, at or above n -> the "
          "largest; otherwise interpolate between the values at ranks floor(h) and floor(h) + 1.")
_TWENTY = [0.05 * i for i in range(20, 0, -1)]       # 1.0, 0.95, ..., 0.05 (unsorted)


def _pct_case(name, values, q, points=1, visible=False):
    return Case(name, points, _probe_percentile(values, q), _judge_percentile(values, q, _TYPE6), visible=visible)


def _bad_pct(values, q, param):
    return (param, Input(repr(values) if param == "values" else repr(q), lambda: (list(values), q)))


PERCENTILE = Test(LAB, "percentile_type_6", "percentile: the exact type-6 percentile (numpy method='weibull')", (
    _pct_case("median_of_five", [5.0, 1.0, 4.0, 2.0, 3.0], 50, visible=True),
    _pct_case("interpolates_between_ranks", [0.1, 0.2, 0.4, 0.8, 1.6], 30, 2),
    _pct_case("p90_of_twenty_interpolates", _TWENTY, 90, 2),
    _pct_case("p99_of_twenty_is_the_max", _TWENTY, 99),
    _pct_case("p1_of_twenty_is_the_min", _TWENTY, 1),
    _pct_case("ties", [0.3, 0.3, 0.3, 0.9], 50),
    _pct_case("one_sample", [0.42], 95),
    _pct_case("q_0_and_100_are_min_and_max", [2.0, 9.0, 4.0], 100),
    rejects_case("rejects_empty_values", "percentile", [_bad_pct([], 50, "values")]),
    rejects_case("rejects_q_out_of_range", "percentile", [("q", Input("101", lambda: ([1.0, 2.0], 101))),
                                                           ("q", Input("-1", lambda: ([1.0, 2.0], -1)))]),
))


def _probe_calls(fn_name, calls):
    # a fresh copy of the arguments for every call (lists, never the tuples written here)
    return call_probe(fn_name, [Input(label, (lambda a=args: tuple(json.loads(json.dumps(a)))))
                                for label, args in calls])


def _judge_calls(fn_name, calls, hint, compare=_same):
    def judge(obs):
        for (label, args), rec in zip(calls, obs):
            call = f"{fn_name}({label})"
            got = result_of(rec, call, hint)
            expected = getattr(ref, fn_name)(*json.loads(json.dumps(args)))
            if not compare(expected, got):
                raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return judge


def _calls_case(name, fn_name, calls, hint, points=1, visible=False, compare=_same):
    return Case(name, points, _probe_calls(fn_name, calls), _judge_calls(fn_name, calls, hint, compare),
                visible=visible)


_EDGES = [0.1, 0.5, 1.0]
_LE_HINT = ("A value v belongs to the first bucket whose upper edge is >= v (Prometheus \"le\"): 0.5 goes in "
            "(0.1, 0.5], not in (0.5, 1.0]. Values above the last edge go to the extra overflow bucket.")
_HQ_HINT = ("rank = q/100 * total; find the first non-empty bucket whose cumulative count reaches the rank and "
            "interpolate from its lower edge (0 for the first bucket) to its upper edge; in the overflow bucket "
            "return the last edge.")
_INTS = lambda e, g: isinstance(g, list) and g == e and all(type(x) is int for x in g)  # noqa: E731

BUCKETS = Test(LAB, "buckets_and_histogram_percentile",
               "bucket_counts with 'le' edges, and percentiles read back from the buckets", (
    _calls_case("counts_per_bucket", "bucket_counts",
                [("[0.05, 0.3, 0.7, 2.0], edges", ([0.05, 0.3, 0.7, 2.0], _EDGES))],
                _LE_HINT, visible=True, compare=_INTS),
    _calls_case("value_on_an_edge_is_in_that_bucket", "bucket_counts",
                [("[0.1, 0.5, 1.0], edges", ([0.1, 0.5, 1.0], _EDGES)), ("[0.5000001], edges", ([0.5000001], _EDGES))],
                _LE_HINT, 2, compare=_INTS),
    _calls_case("overflow_and_empty", "bucket_counts", [("[], edges", ([], _EDGES)), ("[7.5], edges", ([7.5], _EDGES))],
                _LE_HINT, compare=_INTS),
    _calls_case("interpolates_inside_a_bucket", "histogram_percentile",
                [("[0, 4, 0, 0], edges, 50", ([0, 4, 0, 0], _EDGES, 50)),
                 ("[1, 2, 1, 0], edges, 75", ([1, 2, 1, 0], _EDGES, 75))], _HQ_HINT, 2, visible=True),
    _calls_case("first_bucket_starts_at_zero", "histogram_percentile",
                [("[3, 1, 0, 0], edges, 50", ([3, 1, 0, 0], _EDGES, 50))],
                _HQ_HINT),
    _calls_case("overflow_reports_the_last_edge", "histogram_percentile",
                [("[1, 0, 0, 3], edges, 99", ([1, 0, 0, 3], _EDGES, 99))], _HQ_HINT),
    _calls_case("skips_empty_buckets", "histogram_percentile",
                [("[0, 0, 2, 0], edges, 0", ([0, 0, 2, 0], _EDGES, 0)),
                 ("[2, 0, 2, 0], edges, 50", ([2, 0, 2, 0], _EDGES, 50))],
                _HQ_HINT),
    rejects_case("rejects_counts_of_the_wrong_length", "histogram_percentile",
                 [("bucket_counts", Input("[1, 2, 3]", lambda: ([1, 2, 3], _EDGES, 50)))]),
))


# ================================================================= group_percentiles

def _group_probe(name, by, edges, metric):
    def probe(ns):
        fn = function(ns, "group_percentiles")
        try:
            return fn(rows_of(name), by, list(edges), metric)
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
    return probe


def _group_judge(name, by, edges, metric, hint):
    def judge(obs):
        call = f"group_percentiles(<rows of {name}>, {by!r}, {list(edges)!r}, {metric!r})"
        got = result_of({"result": obs}, call, hint)
        expected = ref.group_percentiles(rows_of(name), by, list(edges), metric)
        if not isinstance(got, list) or len(got) != len(expected):
            raise Fail(f"{call} should return one dict per group ({len(expected)} groups for "
                       f"{len(edges)} edges)", expected=len(expected), got=describe(got), hint=hint)
        for e, g in zip(expected, got):
            if not isinstance(g, dict):
                raise Fail(f"{call}: each group should be a dict", got=describe(g))
            for key in ("lo", "hi", "n", "p50", "p95", "p99"):
                if key not in g or not _same(e[key], g[key]):
                    raise Fail(f"{call}: group ({e['lo']}, {e['hi']}] has the wrong {key!r}", expected=e[key],
                               got=g.get(key, "(missing)"), hint=hint)
    return judge


_GROUP_HINT = ("Group i holds rows with edges[i-1] < value <= edges[i] (the first: value <= edges[0], the last: "
               "value > edges[-1]); skip rows whose metric is None; an empty group has n = 0 and None "
               "percentiles, never 0.")


def _rows_probe_edges_bad(ns):
    fn = function(ns, "group_percentiles")
    try:
        return fn(rows_of("trace_mixed"), "input_tokens", [512, 128], "ttft")
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


GROUPS = Test(LAB, "group_percentiles_by_edges",
              "group_percentiles: P50/P95/P99 per input-length, output-length or concurrency group", (
    Case("ttft_by_input_length", 2, _group_probe("trace_mixed", "input_tokens", [128, 512, 1024], "ttft"),
         _group_judge("trace_mixed", "input_tokens", [128, 512, 1024], "ttft", _GROUP_HINT), visible=True,
         fixture="trace_mixed"),
    Case("edges_are_inclusive_above", 2, _group_probe("trace_mixed", "input_tokens", [100, 129, 513], "e2e"),
         _group_judge("trace_mixed", "input_tokens", [100, 129, 513], "e2e", _GROUP_HINT), fixture="trace_mixed"),
    Case("empty_group_is_not_zero", 1, _group_probe("trace_mixed", "input_tokens", [10, 20, 5000], "ttft"),
         _group_judge("trace_mixed", "input_tokens", [10, 20, 5000], "ttft", _GROUP_HINT), fixture="trace_mixed"),
    Case("tpot_skips_one_token_requests", 1, _group_probe("trace_mixed", "output_tokens", [1, 8, 64], "tpot"),
         _group_judge("trace_mixed", "output_tokens", [1, 8, 64], "tpot", _GROUP_HINT), fixture="trace_mixed"),
    Case("e2e_by_concurrency", 1, _group_probe("trace_kv_cache_incident", "concurrency", [2, 4, 8], "e2e"),
         _group_judge("trace_kv_cache_incident", "concurrency", [2, 4, 8], "e2e", _GROUP_HINT),
         fixture="trace_kv_cache_incident"),
    Case("rejects_decreasing_edges", 1, _rows_probe_edges_bad,
         lambda obs: _must_value_error(obs, "edges that are not increasing")),
))


# ================================================================= first_deviation

def _dev_probe(incident, transform=None):
    def probe(ns):
        fn = function(ns, "first_deviation")
        rows = rows_of(incident)
        if transform is not None:
            rows = transform(rows)
        try:
            return fn(rows_of("trace_baseline"), rows)
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
    return probe


def _dev_judge(incident, transform=None):
    def judge(obs):
        rows = rows_of(incident)
        if transform is not None:
            rows = transform(rows)
        expected = ref.first_deviation(rows_of("trace_baseline"), rows)
        got = result_of({"result": obs}, f"first_deviation(<baseline>, <{incident}>)")
        if expected is None:
            if got is not None:
                raise Fail(f"first_deviation(<baseline>, <{incident}>) reports a deviation in noise", expected=None,
                           got=got, hint="Differences within threshold * baseline + the minimum delta are noise: "
                                         "return None.")
            return
        if not isinstance(got, dict) or got.get("stage") != expected["stage"]:
            raise Fail(f"first_deviation(<baseline>, <{incident}>) names the wrong stage",
                       expected=expected["stage"], got=got.get("stage") if isinstance(got, dict) else describe(got),
                       hint="Walk the table in the order a request lives: queue, prefill, TPOT, decode rounds, "
                            "finish reasons, output quality; a queue deviation with a full KV pool is kv_cache.")
        for key in ("metric", "baseline", "incident"):
            ev, gv = expected[key], got.get(key)
            if not (ev == gv if isinstance(ev, str) else _same(ev, gv, 1e-9)):
                raise Fail(f"the evidence {key!r} is wrong", expected=ev, got=gv,
                           hint="Evidence: the metric compared, its baseline and incident values (medians, or "
                                "shares for finish reasons and wrong answers).")
    return judge


def _cut_share(share):
    """Rows of the baseline set whose first `share` of requests end with length, the rest stop."""
    def transform(rows):
        k = round(share * len(rows))
        return [{**r, "finish_reason": "length" if i < k else "stop"} for i, r in enumerate(rows)]
    return transform


def _share_probe(pairs):
    def probe(ns):
        fn = function(ns, "first_deviation")
        out = []
        for b, i in pairs:
            try:
                out.append(fn(_cut_share(b)(rows_of("trace_baseline")), _cut_share(i)(rows_of("trace_baseline"))))
            except NotImplementedError:
                raise
            except Exception as e:
                out.append(raised(e))
        return out
    return probe


def _share_judge(pairs):
    def judge(obs):
        for (b, i), got in zip(pairs, obs):
            call = f"first_deviation(<cut-off share {b}>, <cut-off share {i}>)"
            got = result_of({"result": got}, call)
            expected = ref.first_deviation(_cut_share(b)(rows_of("trace_baseline")),
                                           _cut_share(i)(rows_of("trace_baseline")))
            stage = lambda d: None if d is None else d.get("stage") if isinstance(d, dict) else describe(d)  # noqa: E731
            if stage(got) != stage(expected):
                raise Fail(f"{call} is wrong", expected=stage(expected), got=stage(got),
                           hint="A share deviates when it grows by more than threshold in absolute terms "
                                "(incident share - baseline share > 0.25), not relative to the baseline share: "
                                "from 0.5 to 0.7 is no deviation.")
    return judge


# 24 baseline rows: cut-off shares 12/24 -> 17/24 and 3/24 -> 6/24 grow by less than 0.25 (absolute)
# but by more than 25 % (relative); 12/24 -> 21/24 grows by more than 0.25 either way
_SHARE_PAIRS = ((0.5, 0.7), (0.125, 0.25), (0.5, 0.875))


def _slow_decode(rows):
    return [{**r, "tpot": None if r["tpot"] is None else r["tpot"] * 3} for r in rows]


def _dev_case(incident, points=1, visible=False, transform=None, name=None):
    return Case(name or f"diagnoses_{incident.removeprefix('trace_')}", points, _dev_probe(incident, transform),
                _dev_judge(incident, transform), visible=visible, fixture=incident)


DEVIATION = Test(LAB, "first_deviation_follows_the_table",
                 "first_deviation: the first stage that deviates, with evidence; noise is not a deviation", (
    _dev_case("trace_queue_incident", 2, visible=True),
    _dev_case("trace_prefill_incident", 2),
    _dev_case("trace_tpot_incident"),
    _dev_case("trace_decode_rounds_incident"),
    _dev_case("trace_kv_cache_incident", 2),
    _dev_case("trace_cut_off_incident"),
    _dev_case("trace_not_latency_incident"),
    _dev_case("trace_noise_only", 2, name="noise_is_not_a_deviation"),
    _dev_case("trace_queue_incident", 1, transform=_slow_decode, name="queue_before_decode"),
    Case("share_growth_is_absolute", 1, _share_probe(_SHARE_PAIRS), _share_judge(_SHARE_PAIRS),
         fixture="trace_baseline"),
))


# ================================================================= trace_record

def _record_probe(name, ids):
    def probe(ns):
        fn = function(ns, "trace_record")
        out = []
        for rid in ids:
            try:
                out.append(fn(build_spans(name, {rid}), tokenizer_version=TOKENIZER))
            except NotImplementedError:
                raise
            except Exception as e:
                out.append(raised(e))
        return out
    return probe


def _record_judge(name, ids):
    def judge(obs):
        for rid, got in zip(ids, obs):
            got = result_of({"result": got}, f"trace_record(<spans of {rid}>)")
            problem = ref.validate_record(got)
            if problem is not None:
                raise Fail(f"the trace record of {rid!r} does not satisfy the schema ({problem})", got=describe(got),
                           hint="datasets/schemas/trace_record.schema.json lists every field; a value that does "
                                "not exist is null, never 0.")
            expected = ref.trace_record(build_spans(name, {rid}), tokenizer_version=TOKENIZER)
            for key, ev in expected.items():
                gv = got.get(key)
                ok = _same(ev, gv) if isinstance(ev, float) or (ev is None) else ev == gv
                if not ok:
                    raise Fail(f"field {key!r} of the trace record of {rid!r} is wrong", expected=ev, got=gv)
    return judge


_PATH_IDS = tuple(f"r{i:02d}" for i in range(9))

RECORD = Test(LAB, "trace_record_keeps_what_matters",
              "trace_record: a schema-valid record of one request, read from its spans", (
    Case("stop_request_record", 1, _record_probe("trace_paths", ("r00",)), _record_judge("trace_paths", ("r00",)),
         visible=True, fixture="trace_paths"),
    Case("every_ending", 2, _record_probe("trace_paths", _PATH_IDS), _record_judge("trace_paths", _PATH_IDS),
         fixture="trace_paths"),
    Case("cancelled_in_queue", 1, _record_probe("trace_queue_cancel", ("r05",)),
         _record_judge("trace_queue_cancel", ("r05",)), fixture="trace_queue_cancel"),
))


# ================================================================= to_chrome_trace

def _chrome_probe(name):
    def probe(ns):
        fn = function(ns, "to_chrome_trace")
        try:
            return fn(build_spans(name), counters_of(name))
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
    return probe


def _tracks(trace, what):
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise Fail(f"{what} should be a dict with a list under \"traceEvents\"", got=describe(trace))
    ev = trace["traceEvents"]
    if not all(isinstance(e, dict) for e in ev):
        raise Fail(f"every entry of {what}['traceEvents'] should be a dict")
    names = {}
    for e in ev:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = (e.get("args") or {}).get("name")
    xs: dict = {}
    for e in ev:
        if e.get("ph") == "X":
            for key in ("name", "ts", "dur", "pid", "tid"):
                if key not in e:
                    raise Fail(f"an \"X\" event has no {key!r}", got=describe(e),
                               hint="Complete events need name, ph, ts, dur, pid and tid.")
            xs.setdefault((e["pid"], e["tid"]), []).append(e)
    counters = sorted((e.get("name"), round(float(e.get("ts", -1)), 3), json.dumps(e.get("args"), sort_keys=True))
                      for e in ev if e.get("ph") == "C")
    return names, xs, counters


def _chrome_judge(name, aspect, hint):
    def judge(obs):
        got = result_of({"result": obs}, f"to_chrome_trace(<spans of {name}>)")
        e_names, e_xs, e_counters = _tracks(ref.to_chrome_trace(build_spans(name), counters_of(name)), "expected")
        g_names, g_xs, g_counters = _tracks(got, "the result")
        expected = {e_names[k]: sorted((x["name"], round(x["ts"], 3), round(x["dur"], 3)) for x in v)
                    for k, v in e_xs.items()}
        if aspect in ("units", "tracks"):
            named = {}
            for key, events in g_xs.items():
                rid = g_names.get(key)
                if rid is None:
                    raise Fail(f"track {key} has \"X\" events but no \"M\" thread_name event naming it",
                               hint="Add {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": .., \"tid\": .., "
                                    "\"args\": {\"name\": request_id}} for every track.")
                if rid in named:
                    raise Fail(f"request {rid!r} is spread over several tracks", hint=hint)
                named[rid] = sorted((x["name"], round(float(x["ts"]), 3), round(float(x["dur"]), 3)) for x in events)
            for rid, e in sorted(expected.items()):
                g = named.get(rid)
                if g != e:
                    raise Fail(f"the \"X\" events on the track of {rid!r} (name, ts, dur) are wrong",
                               expected=e[:6], got=(g or [])[:6], hint=hint)
        if aspect == "nesting":
            for key, events in g_xs.items():
                # by start, the longer first: an interval starting with its parent comes after it
                iv = sorted(((float(x["ts"]), float(x["ts"]) + float(x["dur"]), x["name"]) for x in events),
                            key=lambda t: (t[0], -t[1]))
                for i, (a0, a1, an) in enumerate(iv):
                    for b0, b1, bn in iv[i + 1:]:
                        if b0 >= a1:
                            break
                        if b1 > a1 + 1e-6:
                            raise Fail(f"on track {key}, {an!r} [{a0}, {a1}] and {bn!r} [{b0}, {b1}] overlap without "
                                       "nesting", hint=hint)
            if len(g_xs) < len(expected):
                raise Fail("fewer tracks than requests", expected=len(expected), got=len(g_xs), hint=hint)
        if aspect == "counters" and g_counters != e_counters:
            raise Fail("the \"C\" counter events (name, ts us, args) are wrong", expected=e_counters[:6],
                       got=g_counters[:6], hint=hint)
    return judge


_US_HINT = "Chrome trace events count time in MICROseconds: ts = start_ns / 1000, dur = (end_ns - start_ns) / 1000."
_TRACK_HINT = ("One track per request: every span of a request (root and stages) gets that request's tid, and no "
               "other request's; then stages nest inside their root.")

CHROME = Test(LAB, "chrome_trace_opens_in_perfetto",
              "to_chrome_trace: X events in us, one named track per request, nesting, C counters", (
    Case("units_are_microseconds", 2, _chrome_probe("trace_paths"), _chrome_judge("trace_paths", "units", _US_HINT),
         visible=True, fixture="trace_paths"),
    Case("one_track_per_request", 2, _chrome_probe("trace_mixed"), _chrome_judge("trace_mixed", "tracks", _TRACK_HINT),
         fixture="trace_mixed"),
    Case("spans_nest_on_each_track", 2, _chrome_probe("trace_mixed"),
         _chrome_judge("trace_mixed", "nesting", _TRACK_HINT), fixture="trace_mixed"),
    Case("counters_are_c_events", 1, _chrome_probe("trace_queue_cancel"),
         _chrome_judge("trace_queue_cancel", "counters", "One {\"ph\": \"C\", \"name\": name, \"ts\": us, \"pid\": .., "
                       "\"args\": {\"value\": value}} per counter sample."), fixture="trace_queue_cancel"),
))


TESTS = [SPANS, METRICS, PERCENTILE, BUCKETS, GROUPS, DEVIATION, RECORD, CHROME]
