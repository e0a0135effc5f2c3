"""Defined in lab06. Request spans, latency metrics, percentiles and the Perfetto export.

    tracer = RequestTracer(clock, model="tiny-model")          # clock: FakeClock or monotonic
    tracer.start_request("r1", arrival_time=clock(), attributes={"gen_ai.usage.input_tokens": 12})
                                                               # operation="chat" for a chat request
    tracer.start_stage("r1", "prefill")                        # ends "queue", opens "prefill"
    tracer.token("r1")                                         # the first token, at the end of prefill
    tracer.start_stage("r1", "decode"); tracer.token("r1") ...
    tracer.end_request("r1", "stop")                           # ends every span still open
    metrics = request_metrics(tracer.finished_spans())         # queue, prefill, ttft, tpot, itl, e2e
    json.dump(to_chrome_trace(tracer.finished_spans(), tracer.counters()), f)   # open in Perfetto

Spans are real OpenTelemetry SDK spans (TracerProvider, SimpleSpanProcessor,
InMemorySpanExporter), but every start and end time is passed in explicitly, in
nanoseconds, from the clock the tracer was given. With `course.FakeClock` every span is
exact and the same on every machine; with `course.monotonic` the same code measures.

Span tree of one request (one trace per request):

    text_completion {model}          root: arrival -> end (the request's whole life)
    ├── queue                        arrival -> picked up by the server
    ├── prefill                      the prompt's forward pass; the first token is chosen at its end
    ├── decode                       one forward per further token
    ├── parse                        e.g. JSON / tool-call parsing of the output
    └── side_effect                  e.g. the tool call itself
    events on the root: "token" (one per output token, at the time it was chosen)

Tokens per segment (RequestTracer): each stage span ends with gen_ai.usage.output_tokens,
the tokens recorded while it was open (a prefill's is its first token, chosen at its end;
a decode's are the rest), and a stage may be opened with attributes of its own, e.g. the
prompt tokens a prefill feeds as gen_ai.usage.input_tokens (a recompute after preemption
feeds prompt and generated tokens again). spans_from_events replays an event log, which
records no such counts, and leaves them out.

Names follow the OpenTelemetry GenAI semantic conventions where they exist: the root
span is named "{gen_ai.operation.name} {gen_ai.request.model}", with the operation one of
the conventions' values, "text_completion" (OpenAI's completions API, the default) or
"chat"; gen_ai.provider.name is "course" (the conventions list providers such as openai
and allow a custom value when none of them applies); a failed request (finish reason
error) gets status ERROR and error.type (the exception's class name, or "_OTHER" when
unknown) on its root, and status ERROR on the stage span the error interrupted (a cancel
or a timeout is an ending with a finish reason, not an error). The
root's kind is INTERNAL, which the conventions allow for a model running in the process
that records the span (CLIENT is their default, for a call to a remote model). The
attributes gen_ai.request.model / .temperature / .top_p / .max_tokens,
gen_ai.usage.input_tokens / .output_tokens and gen_ai.response.finish_reasons keep their
spec names. The course's own extras all start with "course." and carry their unit in
the name (a backend shows them as plain attributes; the conventions give them no meaning):

    course.request_id          the request's id (str)
    course.cancel_time_s       when a cancelled / timed-out / failed request was stopped (s)
    course.concurrency         requests in flight when it arrived (int)
    course.kv_cache_hit_tokens prompt tokens served from a cached prefix (int)
    course.kv_cache_released   whether its KV blocks went back to the pool (bool)

Definitions (the same as lab04): TTFT is first token time minus ARRIVAL (queueing
included); TPOT averages the n - 1 gaps between n tokens and is None for one token; the
inter-token latencies (ITL) are those gaps themselves. End-to-end latency (e2e) is
arrival to the request's end, the root span's duration: for a request whose last token
ends it, that is last token - arrival (lab04's case); work after the last token (parse,
side_effect) is part of it.

Percentiles: `percentile` is the exact sample percentile of Hyndman and Fan's type 6
(numpy method="weibull"): rank h = (n + 1) q / 100, interpolated linearly between
neighbours and clamped to the smallest/largest sample. Excel's PERCENTILE.EXC uses the
same rank but returns an error (#NUM!) where h < 1 or h > n instead of clamping.
numpy's default ("linear", type 7) uses h = (n - 1) q / 100 + 1 instead; both put the
median at rank (n + 1) / 2, so they agree on every median, but type 7 pulls tail
percentiles of small samples towards the middle: with 20 samples numpy's P99 lies below
the slowest request, type 6 reports the slowest request itself.
`histogram_percentile` reads a percentile back from bucket counts like Prometheus'
histogram_quantile (rank q/100 * total, linear inside the bucket). It differs at q = 0
when the first buckets are empty: Prometheus divides 0 by the empty first bucket's count
and returns NaN, this function returns the lower edge of the first non-empty bucket.
Bucket rule everywhere (histograms and grouping by length or concurrency): a value v
belongs to the first bucket whose upper edge is >= v (Prometheus "le"); values above
the last edge fall in the overflow bucket.
"""
from __future__ import annotations

import bisect
import math
from typing import Iterable

from ._checks import check_choice, check_int, check_number, check_type
from .finish import FinishReason

ANSWERS_FOR = "lab06"

__all__ = ["ANSWERS_FOR", "STAGES", "TTFT_BUCKETS", "TPOT_BUCKETS", "OPERATION", "OPERATIONS", "PROVIDER",
           "RequestTracer",
           "spans_from_events", "counters_from_events", "group_by_request", "request_metrics",
           "percentile", "bucket_counts", "histogram_percentile", "bucket_index", "group_percentiles",
           "first_deviation", "trace_record", "to_chrome_trace", "to_ns"]

STAGES = ("queue", "prefill", "decode", "parse", "side_effect")
# gen_ai.operation.name: the GenAI conventions' values for OpenAI's two generation APIs
OPERATION = "text_completion"
OPERATIONS = ("text_completion", "chat")
PROVIDER = "course"                 # gen_ai.provider.name: a custom value (no listed provider applies)
OTHER_ERROR = "_OTHER"              # error.type when the error's class is unknown (the conventions' fallback)
TOKEN_EVENT = "token"

# OpenTelemetry GenAI semantic conventions, gen_ai.server.time_to_first_token and
# gen_ai.server.time_per_output_token: ExplicitBucketBoundaries, in seconds. vLLM's
# vllm:time_to_first_token_seconds uses the same 16 TTFT edges and adds a tail
# 20, 40, 80, 160, 640, 2560 s; we keep that tail so a badly queued request still
# lands in a finite bucket.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)

# finish reasons decided outside the generation loop: their end time is a cancel time
_CUT_OFF = ("cancelled", "timeout", "error")


def to_ns(seconds: float) -> int:
    """Seconds on the course clock -> integer nanoseconds for the OpenTelemetry SDK."""
    return int(round(seconds * 1e9))


def _attr_value_ok(v) -> bool:
    if isinstance(v, (str, bool, int, float)):
        return not (isinstance(v, float) and not math.isfinite(v))
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (str, bool, int, float)) for x in v)
    return False


def _check_attributes(name: str, attributes) -> dict:
    if attributes is None:
        return {}
    check_type(name, attributes, dict, "a dict of span attributes")
    for k, v in attributes.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"`{name}` keys must be non-empty strings, got {k!r}.")  # pragma: no mutate
        if not _attr_value_ok(v):
            raise ValueError(f"`{name}[{k!r}]` must be a str, bool, int, finite float or a list of them, "  # pragma: no mutate
                             f"got {v!r}.")  # pragma: no mutate
    return dict(attributes)


def _finish_name(finish_reason) -> str:
    return FinishReason.parse(finish_reason).value


# ---------------------------------------------------------------- recording spans

class _Request:
    __slots__ = ("root", "stage", "stage_name", "last", "tokens", "arrival", "stage_first")

    def __init__(self, root, arrival):
        self.root, self.stage, self.stage_name = root, None, None
        self.last = arrival          # the latest time recorded for this request (s)
        self.tokens = 0
        self.stage_first = 0         # self.tokens when the open stage began
        self.arrival = arrival


class _Recorder:
    """Open spans per request on an OpenTelemetry tracer; every time is given explicitly."""

    def __init__(self, tracer, stage_tokens: bool = False):
        self.tracer = tracer
        self.stage_tokens = stage_tokens     # end each stage span with its gen_ai.usage.output_tokens
        self.open: dict[str, _Request] = {}
        self.done: set[str] = set()

    def _end_stage(self, req: _Request, end_ns: int) -> None:
        if self.stage_tokens:
            req.stage.set_attribute("gen_ai.usage.output_tokens", req.tokens - req.stage_first)
        req.stage.end(end_time=end_ns)

    def _get(self, request_id) -> _Request:
        check_type("request_id", request_id, str, "a request id string")
        if request_id not in self.open:
            state = "has already ended" if request_id in self.done else "was never started"
            raise ValueError(f"`request_id` {request_id!r} {state}, got {request_id!r}.")  # pragma: no mutate
        return self.open[request_id]

    @staticmethod
    def _advance(req: _Request, at: float) -> float:
        check_number("at", at)
        if at < req.last:
            raise ValueError(f"`at` must not go back in time (last time for this request {req.last!r}), got {at!r}.")  # pragma: no mutate
        req.last = at
        return at

    def start_request(self, request_id, model, arrival_time, attributes, operation=OPERATION):
        from opentelemetry import trace

        check_type("request_id", request_id, str, "a request id string")
        if not request_id:
            raise ValueError(f"`request_id` must be a non-empty string, got {request_id!r}.")  # pragma: no mutate
        if request_id in self.open or request_id in self.done:
            raise ValueError(f"`request_id` must be new, got {request_id!r} a second time.")  # pragma: no mutate
        check_number("arrival_time", arrival_time)
        check_choice("operation", operation, OPERATIONS)
        attrs = {"gen_ai.operation.name": operation, "gen_ai.provider.name": PROVIDER,
                 "gen_ai.request.model": model, "course.request_id": request_id}
        attrs.update(_check_attributes("attributes", attributes))
        operation, model = attrs["gen_ai.operation.name"], attrs["gen_ai.request.model"]
        check_choice("attributes['gen_ai.operation.name']", operation, OPERATIONS)
        # a fresh context: each request is the root of its own trace
        root = self.tracer.start_span(f"{operation} {model}", context=trace.set_span_in_context(trace.INVALID_SPAN),
                                      kind=trace.SpanKind.INTERNAL, attributes=attrs, start_time=to_ns(arrival_time))
        req = _Request(root, arrival_time)
        self.open[request_id] = req
        self.start_stage(request_id, "queue", arrival_time)

    def start_stage(self, request_id, stage, at, attributes=None):
        from opentelemetry import trace

        req = self._get(request_id)
        check_choice("stage", stage, STAGES)
        attrs = _check_attributes("attributes", attributes)
        at = self._advance(req, at)
        if req.stage is not None:
            self._end_stage(req, to_ns(at))
        req.stage = self.tracer.start_span(stage, context=trace.set_span_in_context(req.root),
                                           attributes=attrs or None, start_time=to_ns(at))
        req.stage_name = stage
        req.stage_first = req.tokens

    def token(self, request_id, at):
        req = self._get(request_id)
        at = self._advance(req, at)
        req.root.add_event(TOKEN_EVENT, {"course.token_index": req.tokens}, timestamp=to_ns(at))
        req.tokens += 1

    def end_request(self, request_id, finish_reason, at, attributes):
        from opentelemetry.trace import Status, StatusCode

        req = self._get(request_id)
        reason = _finish_name(finish_reason)
        extra = _check_attributes("attributes", attributes)
        at = self._advance(req, at)
        end = to_ns(at)
        if req.stage is not None:
            if reason == "error":
                req.stage.set_status(Status(StatusCode.ERROR, "the request failed during this stage"))
            self._end_stage(req, end)
        req.root.set_attributes({"gen_ai.response.finish_reasons": (reason,),
                                 "gen_ai.usage.output_tokens": req.tokens, **extra})
        if reason in _CUT_OFF:
            req.root.set_attribute("course.cancel_time_s", float(at))
        if reason == "error":
            error_type = str(extra.get("error.type") or OTHER_ERROR)
            req.root.set_attribute("error.type", error_type)
            req.root.set_status(Status(StatusCode.ERROR, error_type))
        req.root.end(end_time=end)
        del self.open[request_id]
        self.done.add(request_id)


class RequestTracer:
    """Spans for requests, with times from `clock` (seconds) passed explicitly to the SDK.

    tracer_provider: an OpenTelemetry SDK TracerProvider to record into (e.g. one that
    also exports elsewhere); by default a new one. An in-memory exporter is always
    attached, so `finished_spans()` returns what this tracer recorded.
    """

    def __init__(self, clock, model: str = "tiny-model", tracer_provider=None):
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        if not callable(clock):
            raise ValueError(f"`clock` must be a callable returning seconds (FakeClock, monotonic), "
                             f"got {type(clock).__name__}.")
        check_type("model", model, str, "a model name string")
        if not model:
            raise ValueError(f"`model` must be a non-empty string, got {model!r}.")
        if tracer_provider is None:
            tracer_provider = TracerProvider()
        elif not isinstance(tracer_provider, TracerProvider):
            raise ValueError(f"`tracer_provider` must be an opentelemetry.sdk.trace.TracerProvider, "
                             f"got {type(tracer_provider).__name__}.")
        self.clock = clock
        self.model = model
        self.provider = tracer_provider
        self.exporter = InMemorySpanExporter()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self._rec = _Recorder(tracer_provider.get_tracer("course.tracing"), stage_tokens=True)
        self._counters: list[dict] = []

    def _now(self, at):
        return float(self.clock()) if at is None else at

    def start_request(self, request_id: str, *, arrival_time: float, attributes: dict | None = None,
                      operation: str = OPERATION) -> None:
        """Open the root span "{operation} {model}" at `arrival_time` and its "queue" child.

        operation: gen_ai.operation.name, "text_completion" (default) or "chat"."""
        self._rec.start_request(request_id, self.model, arrival_time, attributes, operation)

    def start_stage(self, request_id: str, stage: str, at: float | None = None,
                    attributes: dict | None = None) -> None:
        """End the request's open stage span and open `stage` (one of STAGES) at `at` (default: now).

        The span that ends gets gen_ai.usage.output_tokens: the tokens recorded while it was
        open. attributes: set on the new stage span, e.g. {"gen_ai.usage.input_tokens": 12}
        for a prefill that feeds 12 tokens."""
        self._rec.start_stage(request_id, stage, self._now(at), attributes)

    def token(self, request_id: str, at: float | None = None) -> None:
        """Record one output token (a "token" event on the root span) at `at` (default: now)."""
        self._rec.token(request_id, self._now(at))

    def end_request(self, request_id: str, finish_reason: str, at: float | None = None, **attributes) -> None:
        """End every span of the request still open, at `at` (default: now).

        Sets gen_ai.response.finish_reasons and gen_ai.usage.output_tokens; for
        cancelled, timeout and error also course.cancel_time_s; an error marks the
        root and the interrupted stage with status ERROR and sets error.type on the
        root (pass **{"error.type": "ModelError"}; "_OTHER" when not given). Extra
        attributes (dotted names, e.g. **{"course.kv_cache_released": True}) go on the root.
        """
        self._rec.end_request(request_id, finish_reason, self._now(at), attributes)

    def counter(self, name: str, value: float, at: float | None = None) -> None:
        """A sample of a server-wide counter, e.g. "kv_blocks_in_use" or "batch_size"."""
        check_type("name", name, str, "a counter name string")
        check_number("value", value)
        at = self._now(at)
        check_number("at", at)
        self._counters.append({"name": name, "time": float(at), "value": value})

    def counters(self) -> list[dict]:
        """Counter samples recorded so far: [{"name", "time" (s), "value"}], in call order."""
        return [dict(c) for c in self._counters]

    def open_requests(self) -> list[str]:
        """Ids of requests that have spans still open."""
        return sorted(self._rec.open)

    def finished_spans(self) -> list:
        """The SDK's ReadableSpan objects of every ended span, in the order they ended."""
        return list(self.exporter.get_finished_spans())


# ---------------------------------------------------------------- replaying an event log

_EVENT_KINDS = ("arrive", "stage", "token", "end", "counter")


def spans_from_events(events, tracer) -> None:
    """Replay an event log into spans on an OpenTelemetry `tracer`.

    events: dicts sorted by "time" (seconds), each with "event" one of
        arrive  {"request_id", "attributes"}   (attributes include gen_ai.request.model and may
                                               set gen_ai.operation.name; default text_completion)
        stage   {"request_id", "stage"}
        token   {"request_id"}
        end     {"request_id", "finish_reason", "attributes"?}
        counter {"name", "value"}               (not a span: ignored here)
    An "end" closes the request's open stage span and its root at the event's time, whatever
    the finish reason; with finish reason error both the root AND the stage the error
    interrupted get status ERROR (the root also error.type), as RequestTracer.end_request.
    """
    check_type("events", events, (list, tuple), "a list of event dicts")
    rec = _Recorder(tracer)
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("event") not in _EVENT_KINDS:
            raise ValueError(f"`events[{i}]` must be a dict whose 'event' is one of "  # pragma: no mutate
                             f"{', '.join(_EVENT_KINDS)}, got {ev!r}.")  # pragma: no mutate
        kind, t = ev["event"], ev.get("time")
        check_number(f"events[{i}]['time']", t)
        if kind == "arrive":
            attrs = dict(ev.get("attributes") or {})
            model = attrs.get("gen_ai.request.model")
            if not isinstance(model, str) or not model:
                raise ValueError(f"`events[{i}]` must carry attributes['gen_ai.request.model'], got {attrs!r}.")  # pragma: no mutate
            rec.start_request(ev["request_id"], model, t, attrs)
        elif kind == "stage":
            rec.start_stage(ev["request_id"], ev["stage"], t)
        elif kind == "token":
            rec.token(ev["request_id"], t)
        elif kind == "end":
            rec.end_request(ev["request_id"], ev["finish_reason"], t, ev.get("attributes"))
    if rec.open:
        raise ValueError(f"`events` must end every request it starts, got no end for {sorted(rec.open)}.")  # pragma: no mutate


def counters_from_events(events) -> list[dict]:
    """The counter samples of an event log: [{"name", "time", "value"}]."""
    check_type("events", events, (list, tuple), "a list of event dicts")
    return [{"name": e["name"], "time": e["time"], "value": e["value"]}
            for e in events if isinstance(e, dict) and e.get("event") == "counter"]


# ---------------------------------------------------------------- metrics from spans

def _is_root(span) -> bool:
    return span.parent is None


def group_by_request(spans) -> dict[str, list]:
    """{request_id: [its spans]} for spans of many requests (a root's trace id names its children)."""
    spans = list(spans)
    roots = {s.context.trace_id: s for s in spans if _is_root(s)}
    out: dict[str, list] = {}
    for tid, root in roots.items():
        rid = root.attributes.get("course.request_id", format(tid, "032x"))
        out[rid] = [s for s in spans if s.context.trace_id == tid]
    return out


def _root_of(spans):
    roots = [s for s in spans if _is_root(s)]
    if len(roots) != 1:
        raise ValueError(f"`spans` must hold the spans of exactly one request (one root), got {len(roots)} roots.")  # pragma: no mutate
    return roots[0]


def request_metrics(spans) -> dict:
    """Per-request latency from the spans of ONE request (root + stages), in seconds.

    Returns {"queue", "prefill", "ttft", "tpot", "itl", "e2e", "output_tokens"}:
    queue / prefill: summed durations of those stage spans, None if the request never
    reached that stage; ttft: first token - arrival (None without tokens); tpot: mean
    of the n - 1 gaps (None for fewer than two tokens); itl: the gaps; e2e: arrival to
    the request's end, the root's duration (parse and side_effect included);
    output_tokens: the number of "token" events.
    """
    spans = list(spans)
    root = _root_of(spans)
    arrival, end = root.start_time, root.end_time
    if end is None:
        raise ValueError("`spans` must be ended spans, got a root span that is still open.")  # pragma: no mutate

    def stage_total(name):
        d = [s.end_time - s.start_time for s in spans if s is not root and s.name == name]
        return None if not d else sum(d) / 1e9

    times = sorted(e.timestamp for e in root.events if e.name == TOKEN_EVENT)
    n = len(times)
    itl = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
    return {
        "queue": stage_total("queue"),
        "prefill": stage_total("prefill"),
        "ttft": None if n == 0 else (times[0] - arrival) / 1e9,
        "tpot": None if n < 2 else (times[-1] - times[0]) / 1e9 / (n - 1),
        "itl": itl,
        "e2e": (end - arrival) / 1e9,
        "output_tokens": n,
    }


# ---------------------------------------------------------------- percentiles

def _values(name, values) -> list[float]:
    check_type(name, values, (list, tuple), "a list of numbers")
    if len(values) == 0:
        raise ValueError(f"`{name}` must hold at least one number, got [].")  # pragma: no mutate
    for i, v in enumerate(values):
        check_number(f"{name}[{i}]", v)
    return sorted(float(v) for v in values)


def percentile(values, q) -> float:
    """The q-th percentile (q in [0, 100]) of `values`, Hyndman-Fan type 6 (numpy "weibull").

    Raises ValueError naming the parameter and showing the bad value: `values` empty or
    holding a non-number or a non-finite number, `q` outside [0, 100]."""
    xs = _values("values", values)
    check_number("q", q, 0, 100)
    n = len(xs)
    h = (n + 1) * q / 100            # 1-based rank
    if h <= 1:
        return xs[0]
    if h >= n:
        return xs[-1]
    lo = math.floor(h)
    return xs[lo - 1] + (h - lo) * (xs[lo] - xs[lo - 1])


def _check_boundaries(boundaries) -> list[float]:
    check_type("boundaries", boundaries, (list, tuple), "a list of increasing bucket edges")
    if len(boundaries) == 0:
        raise ValueError("`boundaries` must hold at least one edge, got [].")  # pragma: no mutate
    for i, b in enumerate(boundaries):
        check_number(f"boundaries[{i}]", b)
    for i in range(1, len(boundaries)):
        if boundaries[i] <= boundaries[i - 1]:
            raise ValueError(f"`boundaries` must be strictly increasing, got {boundaries[i]!r} after "  # pragma: no mutate
                             f"{boundaries[i - 1]!r}.")  # pragma: no mutate
    return list(boundaries)


def bucket_index(value: float, boundaries) -> int:
    """Index of the bucket holding `value`: the first edge >= value; len(boundaries) = overflow."""
    return bisect.bisect_left(boundaries, value)


def bucket_counts(values, boundaries) -> list[int]:
    """Non-cumulative counts per bucket, len(boundaries) + 1 long (the last is the overflow bucket)."""
    edges = _check_boundaries(boundaries)
    check_type("values", values, (list, tuple), "a list of numbers")
    counts = [0] * (len(edges) + 1)
    for i, v in enumerate(values):
        check_number(f"values[{i}]", v)
        counts[bucket_index(v, edges)] += 1
    return counts


def histogram_percentile(bucket_counts, boundaries, q) -> float:
    """The q-th percentile estimated from bucket counts, like Prometheus' histogram_quantile.

    bucket_counts: non-cumulative, len(boundaries) + 1 (last = overflow above the last
    edge). rank = q/100 * total; the answer lies in the first bucket whose cumulative
    count reaches the rank (empty buckets skipped), interpolated linearly between its
    lower edge (0 for the first bucket) and its upper edge; when the first edge is <= 0
    an answer in the first bucket is that edge, as in Prometheus (there is no lower edge
    to interpolate from); in the overflow bucket the
    answer is the last edge (the histogram knows nothing above it). Prometheus agrees
    except at q = 0 with an empty first bucket, where it returns NaN.
    Raises ValueError naming the parameter and showing the bad value: `bucket_counts` of
    the wrong length, with a negative or non-integer count, or counting nothing;
    `boundaries` empty or not strictly increasing; `q` outside [0, 100].
    """
    edges = _check_boundaries(boundaries)
    check_type("bucket_counts", bucket_counts, (list, tuple), "a list of counts")
    if len(bucket_counts) != len(edges) + 1:
        raise ValueError(f"`bucket_counts` must have len(boundaries) + 1 = {len(edges) + 1} entries, "  # pragma: no mutate
                         f"got {len(bucket_counts)}: {list(bucket_counts)!r}.")  # pragma: no mutate
    for i, c in enumerate(bucket_counts):
        check_int(f"bucket_counts[{i}]", c, 0)
    check_number("q", q, 0, 100)
    total = sum(bucket_counts)
    if total == 0:
        raise ValueError(f"`bucket_counts` must count at least one sample, got {list(bucket_counts)!r}.")  # pragma: no mutate
    rank = q / 100 * total
    cum = 0
    for i, c in enumerate(bucket_counts):
        if c > 0 and cum + c >= rank:
            if i == len(edges):
                return float(edges[-1])
            lo = 0.0 if i == 0 else float(edges[i - 1])
            if i == 0 and edges[0] <= 0:
                return float(edges[0])
            return lo + (edges[i] - lo) * (rank - cum) / c
        cum += c
    return float(edges[-1])  # unreachable: the last non-empty bucket always reaches the rank


def group_percentiles(rows, by: str, edges, metric: str, qs=(50, 95, 99)) -> list[dict]:
    """P50/P95/P99 (or `qs`) of rows[metric], grouped by rows[by] into buckets with `edges`.

    Groups: v <= edges[0], edges[0] < v <= edges[1], ..., v > edges[-1]. Each group is
    {"lo", "hi", "n", "p50", "p95", "p99"} (lo None for the first, hi None for the last);
    rows whose metric is None (e.g. TPOT of a one-token request) are left out; an empty
    group has n = 0 and None percentiles, never 0.
    """
    check_type("rows", rows, (list, tuple), "a list of dicts")
    check_type("by", by, str, "a key of the rows")
    check_type("metric", metric, str, "a key of the rows")
    bounds = _check_boundaries(edges)
    check_type("qs", qs, (list, tuple), "a list of percentiles")
    for i, q in enumerate(qs):
        check_number(f"qs[{i}]", q, 0, 100)
    groups: list[list[float]] = [[] for _ in range(len(bounds) + 1)]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or by not in row or metric not in row:
            raise ValueError(f"`rows[{i}]` must be a dict with keys {by!r} and {metric!r}, got {row!r}.")  # pragma: no mutate
        key, value = row[by], row[metric]
        check_number(f"rows[{i}][{by!r}]", key)
        if value is None:
            continue
        check_number(f"rows[{i}][{metric!r}]", value)
        groups[bucket_index(key, bounds)].append(value)
    out = []
    for i, vals in enumerate(groups):
        g = {"lo": None if i == 0 else bounds[i - 1], "hi": None if i == len(bounds) else bounds[i], "n": len(vals)}
        for q in qs:
            g[f"p{q:g}"] = percentile(vals, q) if vals else None
        out.append(g)
    return out


# ---------------------------------------------------------------- the first deviation

# The troubleshooting table, in the order a request lives through it.
DEVIATION_CHECKS = (
    # (diagnosis, metric, kind): kind "time" compares medians in seconds, "count" medians
    # of counts, "share" the fraction of requests for which the metric is true
    ("queue", "queue", "time"),
    ("prefill", "prefill", "time"),
    ("tpot", "tpot", "time"),
    ("decode_rounds", "output_tokens", "count"),
    ("finish_reason", "cut_off", "share"),
    ("not_latency", "wrong", "share"),
)
MIN_DELTA = {"time": 0.005, "count": 1.0, "share": 0.0}   # shares: absolute growth, in fractions of requests


def _median(rows, metric):
    vals = [r[metric] for r in rows if r.get(metric) is not None]
    return percentile(vals, 50) if vals else None


def _share(rows, metric):
    if metric == "cut_off":   # JSON cut in half: the output stopped before it was complete
        return sum(1 for r in rows if r["finish_reason"] in ("length", "cancelled")) / len(rows)
    return sum(1 for r in rows if r[metric]) / len(rows)


def first_deviation(baseline, incident, threshold: float = 0.25) -> dict | None:
    """The first stage whose numbers deviate, following the course's troubleshooting table.

    baseline, incident: lists of per-request rows with keys queue, prefill, ttft, tpot
    (seconds or None), output_tokens (int), finish_reason (str), wrong (bool: the output
    was judged wrong), kv_blocks_peak and kv_capacity (ints, KV blocks in use at the
    worst moment of the request's life and the pool size).

    Walk DEVIATION_CHECKS in order; a time or count deviates when the incident median
    exceeds the baseline median by more than threshold * baseline + MIN_DELTA[kind]; a
    share ("cut_off": finish reason length or cancelled; "wrong") when it grows by more
    than `threshold` in absolute terms (incident share - baseline share > threshold: with
    0.25, from 0.10 to 0.30 is no deviation, from 0.10 to 0.40 is one), not relative to
    the baseline share. A queue deviation while the incident's KV pool was full
    (kv_blocks_peak >= kv_capacity in some request) is blamed on "kv_cache": the queue
    grew because memory ran out; its evidence is the largest share of the pool in use
    ("kv_pool_used"). Returns {"stage", "metric", "baseline", "incident"},
    or None when nothing deviates (noise within the threshold is not a deviation).
    """
    for name, rows in (("baseline", baseline), ("incident", incident)):
        check_type(name, rows, (list, tuple), "a list of per-request rows")
        if len(rows) == 0:
            raise ValueError(f"`{name}` must hold at least one request, got [].")  # pragma: no mutate
    check_number("threshold", threshold, 0, lo_open=True)
    for diagnosis, metric, kind in DEVIATION_CHECKS:
        if kind == "share":
            b, i = _share(baseline, metric), _share(incident, metric)
            if i - b > threshold:
                return {"stage": diagnosis, "metric": metric, "baseline": b, "incident": i}
            continue
        b, i = _median(baseline, metric), _median(incident, metric)
        if b is None or i is None:
            continue
        if i - b > threshold * b + MIN_DELTA[kind]:
            if diagnosis == "queue" and any(r["kv_blocks_peak"] >= r["kv_capacity"] for r in incident):
                used = lambda rows: max(r["kv_blocks_peak"] / r["kv_capacity"] for r in rows)  # noqa: E731
                return {"stage": "kv_cache", "metric": "kv_pool_used", "baseline": used(baseline),
                        "incident": used(incident)}
            return {"stage": diagnosis, "metric": metric, "baseline": b, "incident": i}
    return None


# ---------------------------------------------------------------- the trace record

def trace_record(spans, *, tokenizer_version: str) -> dict:
    """What the course says a trace must keep about one request (see
    datasets/schemas/trace_record.schema.json), read from its spans.

    A value the spans do not hold is None, never 0 or False: input_tokens without
    gen_ai.usage.input_tokens, kv_cache.hit_tokens without course.kv_cache_hit_tokens,
    kv_cache.released without course.kv_cache_released, cancel_time_s without
    course.cancel_time_s."""
    check_type("tokenizer_version", tokenizer_version, str, "a version string")
    spans = list(spans)
    root = _root_of(spans)
    m = request_metrics(spans)
    a = root.attributes
    reasons = a.get("gen_ai.response.finish_reasons") or ("",)
    return {
        "request_id": a.get("course.request_id"),
        "model": a.get("gen_ai.request.model"),
        "tokenizer_version": tokenizer_version,
        "input_tokens": a.get("gen_ai.usage.input_tokens"),
        "output_tokens": m["output_tokens"],
        "queue_s": m["queue"],
        "prefill_s": m["prefill"],
        "ttft_s": m["ttft"],
        "tpot_s": m["tpot"],
        "e2e_s": m["e2e"],
        "finish_reason": reasons[0],
        "kv_cache": {"hit_tokens": a.get("course.kv_cache_hit_tokens"),
                     "released": a.get("course.kv_cache_released")},
        "cancel_time_s": a.get("course.cancel_time_s"),
    }


# ---------------------------------------------------------------- Chrome / Perfetto export

def _us(ns: int) -> float:
    """Nanoseconds -> microseconds, the unit of Chrome trace-event ts and dur."""
    return ns / 1000


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


def to_chrome_trace(spans, counters: Iterable[dict] = ()) -> dict:
    """Chrome trace-event JSON (opens in Perfetto and chrome://tracing).

    One track (tid) per request, numbered by arrival; an "M" thread_name event names
    it; every span is an "X" event with ts and dur in microseconds (children inside
    their root on the same track); each token is an "i" instant on its request's
    track; each counter sample is a "C" event on its own counter track.
    """
    spans = list(spans)
    by_request = group_by_request(spans)
    order = sorted(by_request, key=lambda rid: (_root_of(by_request[rid]).start_time, rid))
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "requests"}}]
    for tid, rid in enumerate(order, start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": rid}})
        # parents before children when they start together, so viewers nest them
        group = sorted(by_request[rid], key=lambda s: (s.start_time, 0 if _is_root(s) else 1, -s.end_time))
        for s in group:
            events.append({"name": s.name, "cat": "request" if _is_root(s) else "stage", "ph": "X",
                           "ts": _us(s.start_time), "dur": _us(s.end_time - s.start_time), "pid": 1, "tid": tid,
                           "args": {k: _plain(v) for k, v in s.attributes.items()}})
            for e in s.events:
                events.append({"name": e.name, "cat": "token", "ph": "i", "s": "t", "ts": _us(e.timestamp),
                               "pid": 1, "tid": tid, "args": {k: _plain(v) for k, v in e.attributes.items()}})
    for c in counters:
        events.append({"name": c["name"], "ph": "C", "ts": _us(to_ns(c["time"])), "pid": 1,
                       "args": {"value": c["value"]}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
