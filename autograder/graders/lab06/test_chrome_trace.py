"""to_chrome_trace(spans, counters=()): the hidden cases of the cell chrome_trace_opens_in_perfetto.

The probe exports every request of a set (probes.build_spans) with its counter samples; the
tests compare the tracks, "X" events and "C" events with the reference's export of the same."""
from __future__ import annotations

import json

import pytest

from autograder.checks import result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import case
from .probes import build_spans, counters_of

pytestmark = pytest.mark.cell("chrome_trace_opens_in_perfetto",
                              description="to_chrome_trace: X events in us, one named track per request, nesting, "
                                          "C counters")

US_HINT = "Chrome trace events count time in MICROseconds: ts = start_ns / 1000, dur = (end_ns - start_ns) / 1000."
TRACK_HINT = ("One track per request: every span of a request (root and stages) gets that request's tid, and no "
              "other request's; then stages nest inside their root.")
TOKEN_HINT = ("Each \"token\" event of a span becomes {\"ph\": \"i\", \"s\": \"t\", \"name\": \"token\", \"ts\": us, "
              "\"pid\": .., \"tid\": its request's track}: an instant on that request's track.")
ARGS_HINT = ("Each \"X\" event's args are its span's attributes as plain JSON values (a tuple becomes a list), "
             "the root's GenAI and course.* attributes among them.")
STAGES = ("queue", "prefill", "decode", "parse", "side_effect")     # the child spans; any other name is a root
UNIT_HINT = "The trace says its display unit: {\"traceEvents\": [...], \"displayTimeUnit\": \"ms\"}."
COUNTER_HINT = ("One {\"ph\": \"C\", \"name\": name, \"ts\": us, \"pid\": 1, \"args\": {\"value\": value}} per "
                "counter sample.")
NUMBER_HINT = ("Number the tracks 1, 2, ... in order of arrival (the earliest root span first): tid 1 is the first "
               "request to arrive, and its \"M\" thread_name event says so.")
ORDER_HINT = ("List a root's \"X\" event before the \"X\" events of its children that start at the same time "
              "(sort a request's spans by start time, the root first on a tie), so viewers nest them.")


def tracks(trace, what):
    """(track names by (pid, tid), "X" events by track, sorted "C" events) of a Chrome trace."""
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
    args = {}
    for key, events in xs.items():
        args[names.get(key)] = sorted((x["name"], round(float(x["ts"]), 3), json.dumps(x.get("args"), sort_keys=True))
                                      for x in events)
    instants: dict = {}
    for e in ev:
        if e.get("ph") == "i":
            instants.setdefault(names.get((e.get("pid"), e.get("tid"))), []).append(
                (str(e.get("name")), round(float(e.get("ts", -1)), 3)))
    instants = {rid: sorted(v) for rid, v in instants.items()}
    counters = sorted((e.get("name"), round(float(e.get("ts", -1)), 3), json.dumps(e.get("args"), sort_keys=True),
                       json.dumps(e.get("pid"))) for e in ev if e.get("ph") == "C")
    return names, xs, counters, instants, args


def root_listed_late(xs, names):
    """(request id, root name, [children]) of the first track whose root "X" event comes after a child
    starting at the same time, in the order the trace lists them; None when every root comes first."""
    for key, events in xs.items():
        for k, x in enumerate(events):
            late = [c["name"] for c in events[:k] if c["name"] in STAGES and float(c["ts"]) == float(x["ts"])]
            if x["name"] not in STAGES and late:
                return names.get(key), x["name"], late
    return None


def judge_tracks(g_names, g_xs, expected, hint):
    """Each request's "X" events (name, ts, dur) on one track of its own, named after it."""
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
    for rid in sorted(set(expected) | set(named), key=str):
        e, g = expected.get(rid), named.get(rid)
        if g != e:
            raise Fail(f"the \"X\" events on the track of {rid!r} (name, ts, dur) are wrong",
                       expected=(e or [])[:6], got=(g or [])[:6], hint=hint)


def judge_nesting(g_xs, expected, hint):
    """On every track, two "X" events either nest or do not overlap; one track per request at least."""
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


@pytest.mark.parametrize("name, aspect, hint", [
    case("units_are_microseconds", "trace_paths", "units", US_HINT, probe=("chrome", "trace_paths"), points=2,
         visible=True, fixture="trace_paths"),
    case("one_track_per_request", "trace_mixed", "tracks", TRACK_HINT, probe=("chrome", "trace_mixed"), points=2,
         fixture="trace_mixed"),
    case("spans_nest_on_each_track", "trace_mixed", "nesting", TRACK_HINT, probe=("chrome", "trace_mixed"),
         points=2, fixture="trace_mixed"),
    case("tokens_are_instants_on_their_track", "trace_paths", "instants", TOKEN_HINT, probe=("chrome", "trace_paths"),
         fixture="trace_paths"),
    case("x_events_carry_the_attributes", "trace_paths", "args", ARGS_HINT, probe=("chrome", "trace_paths"),
         fixture="trace_paths"),
    case("display_time_unit_is_ms", "trace_paths", "unit", UNIT_HINT, probe=("chrome", "trace_paths"),
         fixture="trace_paths"),
    case("counters_are_c_events", "trace_queue_cancel", "counters", COUNTER_HINT,
         probe=("chrome", "trace_queue_cancel"), fixture="trace_queue_cancel"),
    case("tracks_numbered_by_arrival", "trace_mixed", "numbers", NUMBER_HINT, probe=("chrome", "trace_mixed"),
         fixture="trace_mixed"),
    # r05 is cancelled in the queue: its root and its queue span start and end together
    case("roots_before_their_children", "trace_queue_cancel", "order", ORDER_HINT,
         probe=("chrome", "trace_queue_cancel"), fixture="trace_queue_cancel"),
])
def test_chrome_trace(observation, name, aspect, hint):
    """The export's tracks, "X" events (us), nesting and "C" counters against the reference's."""
    got = result_of({"result": observation}, f"to_chrome_trace(<spans of {name}>)")
    e_trace = ref.to_chrome_trace(build_spans(name), counters_of(name))
    e_names, e_xs, e_counters, e_instants, e_args = tracks(e_trace, "expected")
    g_names, g_xs, g_counters, g_instants, g_args = tracks(got, "the result")
    expected = {e_names[k]: sorted((x["name"], round(x["ts"], 3), round(x["dur"], 3)) for x in v)
                for k, v in e_xs.items()}
    if aspect in ("units", "tracks"):
        judge_tracks(g_names, g_xs, expected, hint)
    if aspect == "nesting":
        judge_nesting(g_xs, expected, hint)
    if aspect == "instants":
        for rid in sorted(set(e_instants) | set(g_instants), key=str):
            e, g = e_instants.get(rid), g_instants.get(rid)
            if g != e:
                raise Fail(f"the \"i\" token events on the track of {rid!r} (name, ts us) are wrong",
                           expected=(e or [])[:6], got=(g or [])[:6], hint=hint)
    if aspect == "args":
        for rid, e in sorted((k, v) for k, v in e_args.items() if k is not None):
            if g_args.get(rid) != e:
                raise Fail(f"the args of the \"X\" events on the track of {rid!r} are wrong",
                           expected=e[:3], got=(g_args.get(rid) or [])[:3], hint=hint)
    if aspect == "unit" and got.get("displayTimeUnit") != e_trace["displayTimeUnit"]:
        raise Fail("the trace's \"displayTimeUnit\" is wrong", expected=e_trace["displayTimeUnit"],
                   got=got.get("displayTimeUnit"), hint=hint)
    if aspect == "numbers":
        e_tracks = {tid: rid for (_, tid), rid in e_names.items()}
        g_tracks = {tid: rid for (_, tid), rid in g_names.items()}
        if g_tracks != e_tracks:
            wrong = [tid for tid in sorted(e_tracks) if g_tracks.get(tid) != e_tracks[tid]][:6]
            raise Fail("the tracks (tid: the request id its thread_name event names) are wrong",
                       expected={tid: e_tracks[tid] for tid in wrong},
                       got={tid: g_tracks.get(tid) for tid in wrong} or g_tracks, hint=hint)
    if aspect == "order":
        # grader integrity: the reference's export lists its roots first too (a judge of the student's
        # order alone would pass any order of the expected export)
        if root_listed_late(e_xs, e_names) is not None:
            raise Fail("grader error: the expected export lists a root after a child that starts with it",
                       got=root_listed_late(e_xs, e_names),
                       hint="This is a fault in the grader, not in your code: tell the course staff.")
        late = root_listed_late(g_xs, g_names)
        if late is not None:
            raise Fail(f"on the track of {late[0]!r}, the root {late[1]!r} is listed after its children {late[2]} "
                       "that start with it", hint=hint)
    if aspect == "counters" and g_counters != e_counters:
        raise Fail("the \"C\" counter events (name, ts us, args) are wrong", expected=e_counters[:6],
                   got=g_counters[:6], hint=hint)
