"""course.tracing: spans on a FakeClock, metrics, percentiles, grouping, diagnosis, export."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from course import FakeClock
from course import tracing as T


def _run(finish="stop", tokens=4, clock_start=10.0, stop_after=None):
    """One request: 0.25 s queued, 0.5 s prefill, `tokens` tokens 0.125 s apart."""
    clock = FakeClock(clock_start)
    tr = T.RequestTracer(clock)
    tr.start_request("r1", arrival_time=clock(), attributes={"gen_ai.usage.input_tokens": 4,
                                                              "gen_ai.request.temperature": 0.0})
    clock.advance(0.25)
    tr.start_stage("r1", "prefill")
    clock.advance(0.5)
    if stop_after == "prefill":
        tr.end_request("r1", finish)
        return tr
    tr.token("r1")
    tr.start_stage("r1", "decode")
    for _ in range(tokens - 1):
        clock.advance(0.125)
        tr.token("r1")
    if stop_after is None:
        tr.start_stage("r1", "parse")
        clock.advance(0.0625)
    tr.end_request("r1", finish)
    return tr


ROOT = "text_completion tiny-model"    # "{gen_ai.operation.name} {gen_ai.request.model}"


def _by_name(spans):
    return {s.name: s for s in spans}


def test_span_tree_names_parents_and_exact_times():
    spans = _run().finished_spans()
    s = _by_name(spans)
    assert set(s) == {ROOT, "queue", "prefill", "decode", "parse"}
    root = s[ROOT]
    assert root.parent is None
    for name in ("queue", "prefill", "decode", "parse"):
        assert s[name].parent.span_id == root.context.span_id
        assert s[name].context.trace_id == root.context.trace_id
    assert (s["queue"].start_time, s["queue"].end_time) == (10_000_000_000, 10_250_000_000)
    assert (s["prefill"].start_time, s["prefill"].end_time) == (10_250_000_000, 10_750_000_000)
    assert root.end_time == s["parse"].end_time == 11_187_500_000
    assert root.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert root.attributes["gen_ai.usage.output_tokens"] == 4
    assert "course.cancel_time_s" not in root.attributes


def test_cancel_ends_every_open_span_and_records_the_time():
    tr = _run(finish="cancelled", tokens=3, stop_after="decode")
    assert tr.open_requests() == []
    s = _by_name(tr.finished_spans())
    assert s["decode"].end_time == s[ROOT].end_time == 11_000_000_000
    assert s[ROOT].attributes["course.cancel_time_s"] == 11.0


def test_error_marks_status_and_the_interrupted_stage():
    from opentelemetry.trace import StatusCode
    s = _by_name(_run(finish="error", stop_after="prefill").finished_spans())
    assert s["prefill"].status.status_code == StatusCode.ERROR
    assert s[ROOT].status.status_code == StatusCode.ERROR
    assert s[ROOT].attributes["gen_ai.usage.output_tokens"] == 0


def test_names_follow_the_genai_conventions():
    from opentelemetry.trace import SpanKind

    root = _by_name(_run().finished_spans())[ROOT]
    assert root.attributes["gen_ai.operation.name"] == "text_completion"     # a listed value
    assert root.attributes["gen_ai.provider.name"] == "course"
    assert root.attributes["gen_ai.request.model"] == "tiny-model"
    assert root.kind == SpanKind.INTERNAL          # the model runs in the process that records the span
    assert "error.type" not in root.attributes
    tr = T.RequestTracer(FakeClock())
    tr.start_request("c", arrival_time=0.0, operation="chat")
    tr.end_request("c", "stop", at=1.0)
    assert [s.name for s in tr.finished_spans() if s.parent is None] == ["chat tiny-model"]
    with pytest.raises(ValueError, match="`operation` must be one of 'text_completion', 'chat', got 'generate'"):
        tr.start_request("d", arrival_time=0.0, operation="generate")


def test_an_error_sets_error_type_a_cancel_or_timeout_does_not():
    def root_after(reason, **attributes):
        tr = T.RequestTracer(FakeClock())
        tr.start_request("r", arrival_time=0.0)
        tr.end_request("r", reason, at=1.0, **attributes)
        return tr.finished_spans()[-1]

    assert root_after("error", **{"error.type": "ModelError"}).attributes["error.type"] == "ModelError"
    assert root_after("error").attributes["error.type"] == "_OTHER"      # the conventions' fallback
    for reason in ("cancelled", "timeout", "length"):
        assert "error.type" not in root_after(reason).attributes


def test_requests_are_separate_traces():
    clock = FakeClock()
    tr = T.RequestTracer(clock)
    tr.start_request("a", arrival_time=0.0)
    tr.start_request("b", arrival_time=0.0)
    tr.end_request("a", "stop", at=1.0)
    tr.end_request("b", "stop", at=2.0)
    groups = T.group_by_request(tr.finished_spans())
    assert set(groups) == {"a", "b"}
    assert len({s.context.trace_id for s in tr.finished_spans()}) == 2


def test_misuse_is_rejected_with_the_parameter_named():
    clock = FakeClock(5.0)
    tr = T.RequestTracer(clock)
    tr.start_request("r", arrival_time=5.0)
    with pytest.raises(ValueError, match="`stage` must be one of"):
        tr.start_stage("r", "warmup")
    with pytest.raises(ValueError, match="`at` must not go back"):
        tr.token("r", at=4.0)
    with pytest.raises(ValueError, match="`request_id` must be new"):
        tr.start_request("r", arrival_time=5.0)
    with pytest.raises(ValueError, match="`finish_reason` must be one of"):
        tr.end_request("r", "done")
    tr.end_request("r", "stop")
    with pytest.raises(ValueError, match="has already ended"):
        tr.token("r")
    with pytest.raises(ValueError, match="`attributes"):
        tr.start_request("q", arrival_time=5.0, attributes={"x": object()})


def test_metrics_follow_lab04_definitions():
    m = T.request_metrics(_run().finished_spans())
    assert m["queue"] == 0.25 and m["prefill"] == 0.5
    assert m["ttft"] == 0.75                      # from arrival, queue included
    assert m["tpot"] == 0.125                     # 3 gaps between 4 tokens
    assert m["itl"] == [0.125] * 3
    assert m["e2e"] == 1.1875 and m["output_tokens"] == 4


def test_one_token_has_no_tpot_and_no_token_no_ttft():
    m = T.request_metrics(_run(tokens=1).finished_spans())
    assert m["tpot"] is None and m["itl"] == [] and m["ttft"] == 0.75
    m = T.request_metrics(_run(finish="timeout", stop_after="prefill").finished_spans())
    assert m["ttft"] is None and m["output_tokens"] == 0 and m["prefill"] == 0.5


def test_request_metrics_needs_one_request():
    clock = FakeClock()
    tr = T.RequestTracer(clock)
    for rid in ("a", "b"):
        tr.start_request(rid, arrival_time=0.0)
        tr.end_request(rid, "stop", at=1.0)
    with pytest.raises(ValueError, match="exactly one request"):
        T.request_metrics(tr.finished_spans())


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5, 1, 4, 2, 3], [0.1 * i for i in range(1, 21)],
                                    [2.0, 2.0, 2.0, 9.0]])
@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 95, 99, 100])
def test_percentile_is_numpy_weibull(values, q):
    assert math.isclose(T.percentile(values, q), float(np.percentile(values, q, method="weibull")),
                        rel_tol=1e-12, abs_tol=1e-12)


def test_percentile_differs_from_numpy_default_in_the_tail():
    xs = [float(i) for i in range(1, 21)]
    assert T.percentile(xs, 99) == 20.0               # the slowest request
    assert float(np.percentile(xs, 99)) < 20.0        # numpy's default interpolates below it


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 10, 20])
def test_types_6_and_7_agree_on_every_median(n):
    xs = [float((7 * i) % 11) + 0.5 * i for i in range(n)]       # odd and even counts
    assert T.percentile(xs, 50) == pytest.approx(float(np.percentile(xs, 50)))


def test_percentile_rejects_empty_and_bad_q():
    with pytest.raises(ValueError, match=r"`values` must hold at least one number, got \[\]"):
        T.percentile([], 50)
    with pytest.raises(ValueError, match=r"`q` must be a number in \[0, 100\], got 101"):
        T.percentile([1.0], 101)


def test_bucket_rule_is_le():
    edges = [0.1, 0.5]
    assert T.bucket_counts([0.1, 0.1000001, 0.5, 0.6, 0.0], edges) == [2, 2, 1]


def test_histogram_percentile_matches_prometheus_rules():
    edges = [1.0, 2.0, 4.0]
    assert T.histogram_percentile([0, 4, 0, 0], edges, 50) == 1.5      # halfway through (1, 2]
    assert T.histogram_percentile([2, 0, 0, 0], edges, 50) == 0.5      # first bucket starts at 0
    assert T.histogram_percentile([1, 0, 0, 3], edges, 99) == 4.0      # overflow -> last edge
    assert T.histogram_percentile([0, 0, 2, 0], edges, 0) == 2.0       # lower edge of first occupied bucket
    # ... where Prometheus computes 0 * (0 / 0) in the empty first bucket: NaN. Like it, not the same.
    assert T.histogram_percentile([2, 0, 2, 0], edges, 0) == 0.0       # an occupied first bucket: both say 0
    with pytest.raises(ValueError, match="`bucket_counts` must count at least one sample"):
        T.histogram_percentile([0, 0, 0, 0], edges, 50)
    with pytest.raises(ValueError, match=r"`bucket_counts` must have len\(boundaries\) \+ 1 = 4"):
        T.histogram_percentile([1, 0, 0], edges, 50)


@pytest.mark.parametrize("q", [1, 25, 50, 90, 95, 99])
def test_bucketed_percentile_error_is_bounded_by_the_bucket_width(q):
    # One rank definition on both sides: the histogram's rank q/100 * n is the sample at
    # that rank (numpy "inverted_cdf"), and both lie in the same bucket.
    values = [0.013, 0.017, 0.03, 0.033, 0.07, 0.09, 0.2, 0.6, 0.0405, 0.061, 0.079, 1.7]
    counts = T.bucket_counts(values, T.TTFT_BUCKETS)
    exact = float(np.percentile(values, q, method="inverted_cdf"))
    est = T.histogram_percentile(counts, T.TTFT_BUCKETS, q)
    i = T.bucket_index(exact, list(T.TTFT_BUCKETS))
    lo = 0.0 if i == 0 else T.TTFT_BUCKETS[i - 1]
    assert lo <= est <= T.TTFT_BUCKETS[i]
    assert abs(est - exact) <= T.TTFT_BUCKETS[i] - lo


def test_bucket_constants_are_the_otel_genai_boundaries():
    assert T.TTFT_BUCKETS[:16] == (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                                   5.0, 7.5, 10.0)
    assert T.TPOT_BUCKETS == (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
    assert list(T.TTFT_BUCKETS) == sorted(set(T.TTFT_BUCKETS))


def test_group_percentiles_edges_small_and_empty_groups():
    rows = [{"input_tokens": n, "ttft": t} for n, t in [(64, 0.1), (128, 0.2), (129, 0.3), (600, None)]]
    groups = T.group_percentiles(rows, "input_tokens", [128, 512], "ttft")
    assert [(g["lo"], g["hi"], g["n"]) for g in groups] == [(None, 128, 2), (128, 512, 1), (512, None, 0)]
    assert groups[1]["p99"] == 0.3
    assert groups[2]["p50"] is None                    # empty is not zero
    assert groups[0]["p50"] == pytest.approx(0.15)


def _rows(n=10, **over):
    base = {"queue": 0.02, "prefill": 0.1, "ttft": 0.12, "tpot": 0.03, "output_tokens": 20,
            "finish_reason": "stop", "wrong": False, "kv_blocks_peak": 10, "kv_capacity": 64}
    return [{**base, **over} for _ in range(n)]


@pytest.mark.parametrize("over,stage", [
    ({"queue": 0.5}, "queue"),
    ({"prefill": 0.4}, "prefill"),
    ({"tpot": 0.09}, "tpot"),
    ({"output_tokens": 60}, "decode_rounds"),
    ({"finish_reason": "length"}, "finish_reason"),
    ({"wrong": True}, "not_latency"),
    ({"queue": 0.5, "kv_blocks_peak": 64}, "kv_cache"),
    ({"queue": 0.5, "tpot": 0.09}, "queue"),           # the FIRST deviation wins
])
def test_first_deviation_follows_the_table(over, stage):
    got = T.first_deviation(_rows(), _rows(**over))
    assert got is not None and got["stage"] == stage


def test_noise_within_threshold_is_not_a_deviation():
    noisy = _rows(queue=0.022, prefill=0.11, tpot=0.033, output_tokens=21)
    assert T.first_deviation(_rows(), noisy) is None


def test_a_share_deviates_by_its_absolute_growth_not_its_relative_growth():
    def cut(share, n=20):
        k = round(share * n)
        return [{**r, "finish_reason": "length" if i < k else "stop"} for i, r in enumerate(_rows(n))]

    # 0.5 -> 0.7: +0.2 absolute (no deviation at 0.25), +40 % relative (a deviation if it were relative)
    assert T.first_deviation(cut(0.5), cut(0.7)) is None
    # 0.1 -> 0.3: +0.2 absolute, +200 % relative
    assert T.first_deviation(cut(0.1), cut(0.3)) is None
    # 0.5 -> 0.8: +0.3 absolute, a deviation
    got = T.first_deviation(cut(0.5), cut(0.8))
    assert (got["stage"], got["metric"], got["baseline"], got["incident"]) == ("finish_reason", "cut_off", 0.5, 0.8)


def test_chrome_trace_units_tracks_and_nesting():
    clock = FakeClock()
    tr = T.RequestTracer(clock)
    tr.start_request("a", arrival_time=0.0)
    tr.start_request("b", arrival_time=0.001)
    tr.start_stage("a", "prefill", at=0.002)
    tr.token("a", at=0.0035)
    tr.counter("batch_size", 2, at=0.002)
    tr.end_request("a", "stop", at=0.004)
    tr.end_request("b", "cancelled", at=0.005)
    trace = json.loads(json.dumps(T.to_chrome_trace(tr.finished_spans(), tr.counters())))
    ev = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {1: "a", 2: "b"}
    xs = [e for e in ev if e["ph"] == "X"]
    root_a = next(e for e in xs if e["tid"] == 1 and e["cat"] == "request")
    assert (root_a["ts"], root_a["dur"]) == (0.0, 4000.0)                      # microseconds
    prefill = next(e for e in xs if e["name"] == "prefill")
    assert (prefill["ts"], prefill["dur"], prefill["tid"]) == (2000.0, 2000.0, 1)
    for tid in (1, 2):
        track = [e for e in xs if e["tid"] == tid]
        root = next(e for e in track if e["cat"] == "request")
        assert all(root["ts"] <= e["ts"] and e["ts"] + e["dur"] <= root["ts"] + root["dur"] for e in track)
    assert [e for e in ev if e["ph"] == "C"] == [{"name": "batch_size", "ph": "C", "ts": 2000.0, "pid": 1,
                                                  "args": {"value": 2}}]
    assert [e["ts"] for e in ev if e["ph"] == "i"] == [3500.0]


def test_spans_from_events_matches_the_online_tracer():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    events = [
        {"time": 10.0, "event": "arrive", "request_id": "r1",
         "attributes": {"gen_ai.request.model": "tiny-model", "gen_ai.usage.input_tokens": 4,
                        "gen_ai.request.temperature": 0.0}},
        {"time": 10.25, "event": "stage", "request_id": "r1", "stage": "prefill"},
        {"time": 10.5, "event": "counter", "name": "batch_size", "value": 1},
        {"time": 10.75, "event": "token", "request_id": "r1"},
        {"time": 10.75, "event": "stage", "request_id": "r1", "stage": "decode"},
        {"time": 10.875, "event": "token", "request_id": "r1"},
        {"time": 11.0, "event": "end", "request_id": "r1", "finish_reason": "cancelled"},
    ]
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    T.spans_from_events(events, provider.get_tracer("test"))
    replayed = T.request_metrics(exporter.get_finished_spans())
    online = T.request_metrics(_run(finish="cancelled", tokens=2, stop_after="decode").finished_spans())
    assert {k: v for k, v in replayed.items() if k != "e2e"} == {k: v for k, v in online.items() if k != "e2e"}
    assert T.counters_from_events(events) == [{"name": "batch_size", "time": 10.5, "value": 1}]
    with pytest.raises(ValueError, match="must end every request"):
        T.spans_from_events(events[:-1], provider.get_tracer("test"))


# ---------------------------------------------------------------- the lab06 request sets

FIXTURES = Path(__file__).resolve().parents[1] / "datasets" / "fixtures"
SCHEMA = Path(__file__).resolve().parents[1] / "datasets" / "schemas" / "trace_record.schema.json"
INCIDENTS = {"trace_queue_incident": "queue", "trace_prefill_incident": "prefill", "trace_tpot_incident": "tpot",
             "trace_decode_rounds_incident": "decode_rounds", "trace_kv_cache_incident": "kv_cache",
             "trace_cut_off_incident": "finish_reason", "trace_not_latency_incident": "not_latency",
             "trace_noise_only": None}


def _load(name):
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _replay(rs):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    T.spans_from_events(rs["events"], provider.get_tracer("test"))
    return T.group_by_request(exporter.get_finished_spans())


def _diagnosis_rows(rs):
    """Diagnosis rows from the spans of a request set (as the notebook builds them)."""
    peaks = {tl["request_id"]: tl["kv_blocks_peak"] for tl in rs["timelines"]}
    out = []
    for rid, spans in _replay(rs).items():
        root = next(s for s in spans if s.parent is None)
        out.append({**T.request_metrics(spans), "finish_reason": root.attributes["gen_ai.response.finish_reasons"][0],
                    "wrong": not root.attributes["course.output_correct"], "kv_blocks_peak": peaks[rid],
                    "kv_capacity": rs["costs"]["kv_capacity"]})
    return out


@pytest.mark.parametrize("name", ["trace_paths", "trace_mixed", "trace_queue_cancel"])
def test_spans_of_a_request_set_match_its_timelines(name):
    rs = _load(name)
    groups = _replay(rs)
    assert set(groups) == {tl["request_id"] for tl in rs["timelines"]}
    for tl in rs["timelines"]:
        spans = groups[tl["request_id"]]
        stages = sorted((s for s in spans if s.parent is not None), key=lambda s: s.start_time)
        assert [[s.name, s.start_time, s.end_time] for s in stages] == \
               [[n, T.to_ns(a), T.to_ns(b)] for n, a, b in tl["stages"]]
        m = T.request_metrics(spans)
        assert m["output_tokens"] == len(tl["tokens"])
        assert m["e2e"] == pytest.approx(tl["end"] - tl["arrival"], abs=1e-9)


def test_every_ending_appears_in_the_paths_set():
    reasons = {tl["finish_reason"] for tl in _load("trace_paths")["timelines"]}
    assert reasons == {"stop", "length", "cancelled", "timeout", "error"}
    queued = [tl for tl in _load("trace_queue_cancel")["timelines"] if len(tl["stages"]) == 1]
    assert [tl["finish_reason"] for tl in queued] == ["cancelled"]


@pytest.mark.parametrize("name,stage", sorted(INCIDENTS.items()))
def test_each_incident_set_is_diagnosed_as_its_row_of_the_table(name, stage):
    got = T.first_deviation(_diagnosis_rows(_load("trace_baseline")), _diagnosis_rows(_load(name)))
    assert (got and got["stage"]) == stage


def test_trace_records_validate_against_the_schema():
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for spans in _replay(_load("trace_paths")).values():
        record = json.loads(json.dumps(T.trace_record(spans, tokenizer_version="tiny-model-bpe-512")))
        validator.validate(record)
    bad = {**record, "ttft_s": 0.0, "output_tokens": 0, "finish_reason": "stop", "cancel_time_s": None}
    assert not validator.is_valid(bad)          # a request without tokens has no TTFT, not a zero one


def test_a_value_the_spans_do_not_hold_is_none_in_the_record():
    tr = T.RequestTracer(FakeClock())
    tr.start_request("r", arrival_time=0.0)           # no input tokens, no KV-cache attributes
    tr.token("r", at=0.5)
    tr.end_request("r", "stop", at=1.0)
    record = T.trace_record(tr.finished_spans(), tokenizer_version="tiny-model-bpe-512")
    assert record["input_tokens"] is None and record["cancel_time_s"] is None and record["tpot_s"] is None
    assert record["kv_cache"] == {"hit_tokens": None, "released": None}       # unknown, not 0 and False
    import jsonschema                                   # and the schema says unknown is allowed
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(
        json.loads(json.dumps(record)))


EXAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "lab06_example_trace.json"


def example_trace() -> dict:
    """The Chrome trace of the trace_mixed request set, as lab06's notebook exports it."""
    rs = _load("trace_mixed")
    spans = [s for group in _replay(rs).values() for s in group]
    return T.to_chrome_trace(spans, T.counters_from_events(rs["events"]))


def test_committed_example_trace_is_what_the_export_writes():
    committed = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert committed == json.loads(json.dumps(example_trace()))
    tracks = {e["tid"] for e in committed["traceEvents"] if e["ph"] == "X"}
    named = {e["tid"] for e in committed["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == named and len(tracks) == 40


if __name__ == "__main__":   # rewrite the committed example: python tests/test_tracing.py
    EXAMPLE.write_text(json.dumps(example_trace(), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {EXAMPLE}")
