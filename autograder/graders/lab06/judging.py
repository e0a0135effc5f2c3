"""Judging helpers shared by lab06's tests (grading process only).

Nothing the student's process sends is trusted: the span dumps are checked for their shape
before anything reads them, and every expected value comes from autograder/reference/lab06.py.
"""
from __future__ import annotations

import math

import pytest

from autograder.core import Fail, describe, is_raised


def case(name, *values, probe, visible=False, points=1, fixture=None):
    """One row of a case table: `values` for the test's parameters, the probe call
    (name, *plain args) and the report fields of the case."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, points=points, fixture=fixture)])


def same(e, g, tol=1e-9):
    """g equals the expected e: None only for None, lists item by item, numbers (not bools)
    within rel 1e-9 / abs `tol`."""
    if e is None or g is None:
        return e is None and g is None
    if isinstance(e, list):
        return isinstance(g, list) and len(e) == len(g) and all(same(a, b, tol) for a, b in zip(e, g))
    return isinstance(g, (int, float)) and not isinstance(g, bool) and math.isclose(e, g, rel_tol=1e-9, abs_tol=tol)


RECORD = ("result", "unchanged", "same_object")    # the keys of a checks.record


def records(obs, n: int, keys=()) -> list:
    """The observation of a probe that makes n calls: a list of n records (each a dict holding
    `keys`, when keys are named)."""
    if not (isinstance(obs, list) and len(obs) == n) \
            or (keys and not all(isinstance(r, dict) and set(keys) <= set(r) for r in obs)):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


def must_value_error(obs, what):
    if not is_raised(obs) or not obs["is_value_error"]:
        raise Fail(f"should raise ValueError for {what}", expected="ValueError", got=describe(obs),
                   hint="Check each event before using it and raise ValueError saying what is wrong.")


# ---------------------------------------------------------------- span dumps (probes.dump_spans)

_NUMBER = (int, float)
_SPAN_FIELDS = {"name": str, "trace_id": str, "span_id": str, "parent_id": (str, type(None)), "start_ns": _NUMBER,
                "end_ns": _NUMBER, "attributes": dict, "events": list, "status": str}


def span_dump(dump) -> list[dict]:
    """`dump` if it has the shape probes.dump_spans gives, else an assertion error."""
    if not isinstance(dump, list):
        raise Fail("the probe returned an unexpected observation", got=describe(dump))
    for s in dump:
        if not (isinstance(s, dict) and all(isinstance(s.get(k), t) for k, t in _SPAN_FIELDS.items())
                and all(isinstance(e, dict) and isinstance(e.get("name"), str)
                        and isinstance(e.get("time_ns"), _NUMBER) for e in s["events"])):
            raise Fail("the probe returned an unexpected observation", got=describe(s))
    return dump


def _us(ns) -> int:
    return int(round(ns / 1000))


def view(dump: list[dict]) -> dict:
    """{request_id: what the judges compare} from a span dump; raises Fail on a broken tree."""
    dump = span_dump(dump)
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
            # course.token_index of the token events in time order (the dump sends it as "index")
            "token_index": [e.get("index") for e in sorted((e for e in root["events"] if e["name"] == "token"),
                                                           key=lambda e: e["time_ns"])],
            # the stages marked ERROR: (name, start us)
            "error_stages": sorted([k["name"], _us(k["start_ns"])] for k in kids if k["status"] == "ERROR"),
            "attributes": root["attributes"], "status": root["status"],
            "trace_id": root["trace_id"],
        }
    orphans = [s["name"] for s in dump if s["parent_id"] is not None
               and not any(s["parent_id"] == r["span_id"] for r in roots)]
    if orphans:
        raise Fail(f"spans {orphans[:5]} have a parent that is not a request's root span",
                   hint="Every stage span is a child of its request's root span \"text_completion {model}\".")
    return out
