"""spans_from_events(events, tracer): the hidden cases of the cell spans_from_events_builds_the_tree.

The probe hands the student a tracer whose in-memory exporter they never see and returns the
dump of every span it finished; the expected spans come from the reference on the same events.
"""
from __future__ import annotations

import math

import pytest

from autograder.checks import reference_rejects
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab06 as ref

from .judging import case, must_value_error, records, view
from .probes import ARRIVE_AFTER_END, ARRIVE_TWICE, EVENT_LOGS, GHOST_TOKEN, OTHER_SETS, TOKEN_AFTER_END, dump_spans, request_set

pytestmark = pytest.mark.cell("spans_from_events_builds_the_tree",
                              description="spans_from_events: one root per request, stage children, token events, "
                                          "every ending closes every span")

ATTRS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.request.temperature",
         "gen_ai.request.top_p", "gen_ai.request.max_tokens", "gen_ai.usage.input_tokens",
         "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "error.type", "course.request_id",
         "course.cancel_time_s")
TREE_HINT = ("Each stage span starts at its event's time and ends when the next stage starts or the request "
             "ends; pass times as start_time / end_time in integer nanoseconds (round(t * 1e9)).")
CUT_HINT = ("When a request ends (any finish reason) end its open stage span AND its root at the end event's "
            "time; for cancelled, timeout and error record course.cancel_time_s.")
ATTRS_HINT = ("The root gets gen_ai.operation.name \"text_completion\", gen_ai.provider.name \"course\" and the "
              "arrive event's attributes; at the end set gen_ai.response.finish_reasons (a list), "
              "gen_ai.usage.output_tokens, the end event's attributes (error.type of a failed request among them), "
              "and course.cancel_time_s for cancelled / timeout / error.")


def spans_view(obs) -> dict:
    """What the student's spans say per request (judging.view), or why they cannot be read."""
    if not (isinstance(obs, dict) and "result" in obs and "spans" in obs):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    if is_raised(obs["result"]):
        r = obs["result"]
        raise Fail(f"spans_from_events raised {r['__raised__']}: {r['message']}", got=describe(r))
    return view(obs["spans"])


def judge_spans(obs, name, aspects, hint, events=None):
    """The student's spans of set `name` (or of the event log `events`) against the reference's, on the
    `aspects` named."""
    got = spans_view(obs)
    expected = view(dump_spans(ref.expected_spans(request_set(name)["events"] if events is None else events)))
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
        if "status" in aspects and g["status"] != e["status"]:
            raise Fail(f"the status of the root span of {rid!r} is wrong", expected=e["status"],
                       got=g["status"], hint="A request that ends with finish reason error gets status "
                                             "ERROR (span.set_status(StatusCode.ERROR)).")
    if "error_stages" in aspects:
        for rid in sorted(expected):
            if got[rid]["error_stages"] != expected[rid]["error_stages"]:
                raise Fail(f"the stage spans of {rid!r} with status ERROR (name, start us) are wrong",
                           expected=expected[rid]["error_stages"], got=got[rid]["error_stages"],
                           hint="A request that ends with finish reason error marks its root AND the stage span "
                                "the error interrupted (the one still open) with status ERROR; no other stage.")
    if "token_index" in aspects:
        for rid in sorted(expected):
            if got[rid]["token_index"] != expected[rid]["token_index"]:
                raise Fail(f"course.token_index of the \"token\" events of {rid!r} (in time order) is wrong",
                           expected=expected[rid]["token_index"], got=got[rid]["token_index"],
                           hint="Number each request's token events 0, 1, 2, ... in the attribute "
                                "course.token_index.")
    if "traces" in aspects and len({g["trace_id"] for g in got.values()}) != len(got):
        raise Fail("several requests share one trace", hint="Start each root span in a fresh context "
                   "(context=trace.set_span_in_context(trace.INVALID_SPAN)) so it begins its own trace.")


@pytest.mark.parametrize("name, aspects, hint", [
    case("paths_span_tree", "trace_paths", ["tree"], TREE_HINT, probe=("spans", "trace_paths"), points=2,
         visible=True, fixture="trace_paths"),
    case("paths_attributes", "trace_paths", ["attributes"], ATTRS_HINT, probe=("spans", "trace_paths"), points=2,
         fixture="trace_paths"),
    case("paths_token_events", "trace_paths", ["tokens"], None, probe=("spans", "trace_paths"),
         fixture="trace_paths"),
    case("error_sets_status", "trace_paths", ["status"], None, probe=("spans", "trace_paths"), fixture="trace_paths"),
    case("error_marks_the_interrupted_stage", "trace_paths", ["error_stages"], None, probe=("spans", "trace_paths"),
         fixture="trace_paths"),
    case("token_events_are_numbered", "trace_paths", ["token_index"], None, probe=("spans", "trace_paths"),
         fixture="trace_paths"),
    case("cancelled_while_queued", "trace_queue_cancel", ["tree", "attributes"], CUT_HINT,
         probe=("spans", "trace_queue_cancel"), points=2, fixture="trace_queue_cancel"),
    case("mixed_set_every_span", "trace_mixed", ["tree", "tokens", "attributes", "status"], CUT_HINT,
         probe=("spans", "trace_mixed"), points=2, fixture="trace_mixed"),
])
def test_spans_of_a_set(observation, name, aspects, hint):
    """The root and stage spans, token events, attributes and status of every request of the set."""
    judge_spans(observation, name, aspects, hint)


OTHER_HINT = ("A request that ends with finish reason error gets error.type from the end event's attributes; "
              "when they name none, error.type is \"_OTHER\" (the OpenTelemetry conventions' fallback).")


@pytest.mark.probe("spans_of_log", "error_without_type")
def test_error_without_a_type_is_other(observation):
    """A failed request whose end event names no error type gets error.type "_OTHER" on its root."""
    judge_spans(observation, "an error without a type", ["tree", "attributes", "status"], OTHER_HINT,
                events=EVENT_LOGS["error_without_type"])


@pytest.mark.probe("spans_every_set")
def test_every_other_request_set(observation):
    """The span tree, token events and attributes on each of the other request sets."""
    for name, one in zip(OTHER_SETS, records(observation, len(OTHER_SETS))):
        judge_spans(one, name, ["tree", "tokens", "attributes"], TREE_HINT)


@pytest.mark.probe("spans", "trace_baseline")
@pytest.mark.cell(fixture="trace_baseline")
def test_one_trace_per_request(observation):
    """Each request's root span begins a trace of its own."""
    judge_spans(observation, "trace_baseline", ["traces", "tree"], TREE_HINT)


@pytest.mark.probe("spans_bad")
def test_rejects_token_of_unknown_request(observation):
    """A token event of a request that never arrived raises ValueError."""
    must_value_error(observation, "a token event of a request that never arrived")
    reference_rejects(ref.expected_spans, (GHOST_TOKEN,), {}, "a token event of a request that never arrived")


@pytest.mark.probe("spans_after_end")
def test_rejects_event_after_the_end(observation):
    """A token event of a request that has already ended raises ValueError."""
    must_value_error(observation, "a token event of a request that has already ended")
    reference_rejects(ref.expected_spans, (TOKEN_AFTER_END,), {}, "a token event of a request that has already ended")


@pytest.mark.probe("spans_arrive_again")
def test_rejects_a_second_arrive(observation):
    """An arrive of a request id that has arrived before (still open, or ended) raises ValueError."""
    whats = ("a second arrive of a request that is still open", "an arrive of a request that has already ended")
    for what, events, got in zip(whats, (ARRIVE_TWICE, ARRIVE_AFTER_END), records(observation, 2)):
        must_value_error(got, what)
        reference_rejects(ref.expected_spans, (events,), {}, what)
