"""Judging helpers shared by lab07's tests (grading process only: they use the reference).

A trace's observation is checked for its shape before anything reads it; the expected
trace is the same TRACES entry run on the reference engine (course.engine.Engine).
"""
from __future__ import annotations

import copy
from functools import lru_cache

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab07 as ref

from .probes import TRACES, run_trace

TRACE_KEYS = ("steps", "log", "abort_blocks", "num_blocks", "free_end", "clock", "unfinished", "logits")


@lru_cache(maxsize=64)
def expected(name: str) -> dict:
    """The reference engine's run of TRACES[name] (read it, never change it)."""
    with one_thread():
        return run_trace(ref.Engine, **copy.deepcopy(TRACES[name]))


def _is_int(x) -> bool:
    return type(x) is int


def _shaped(obs) -> bool:
    """True when `obs` has the shape run_trace gives: the parts the probe builds itself are
    checked to the element; what the engine returned (tokens, text, reasons) is left to the tests."""
    if not isinstance(obs, dict) or any(k not in obs for k in TRACE_KEYS):
        return False
    if not (isinstance(obs["steps"], list) and isinstance(obs["log"], list) and isinstance(obs["abort_blocks"], dict)
            and isinstance(obs["logits"], dict) and all(isinstance(v, list) for v in obs["logits"].values())):
        return False
    for step in obs["steps"]:
        if not (isinstance(step, dict) and isinstance(step.get("outputs"), list) and _is_int(step.get("forwards"))
                and isinstance(step.get("finished_blocks"), dict) and "free" in step):
            return False
        if not all(isinstance(o, list) and len(o) == 5 and isinstance(o[0], str) and isinstance(o[1], list)
                   for o in step["outputs"]):
            return False
    return all(isinstance(call, list) and all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)
                                              and _is_int(r[1]) and _is_int(r[2]) for r in call)
               for call in obs["log"])


def data(obs, what="the trace"):
    """The trace's observation, or a Fail: the engine raised, or the data is not a trace."""
    if is_raised(obs):
        raise Fail(f"{what} could not run: your engine raised {obs['__raised__']}: {obs['message']}",
                   got=describe(obs))
    if not _shaped(obs):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


def per_request(trace):
    """{name: {"tokens", "text", "finish", "stop_reason", "finished_at"}} from a trace's outputs."""
    out = {}
    for i, step in enumerate(trace["steps"]):
        for name, new, delta, finish, stop_reason in step["outputs"]:
            r = out.setdefault(name, {"tokens": [], "text": "", "finish": None, "stop_reason": None,
                                      "finished_at": None, "after_finish": 0})
            if r["finish"] is not None:
                r["after_finish"] += 1
            r["tokens"] += new
            r["text"] += delta
            if finish is not None and r["finish"] is None:
                r["finish"], r["stop_reason"], r["finished_at"] = finish, stop_reason, i
    return out


def same_requests(obs, trace, keys=("tokens", "finish"), hint=None, names=None):
    """Each request of TRACES[trace] (or only `names`) has the reference engine's `keys`, and
    the engine has nothing unfinished at the end."""
    got, want = per_request(data(obs)), per_request(expected(trace))
    for name in names or sorted(want):
        g, w = got.get(name), want[name]
        if g is None:
            raise Fail(f"request {name!r} never produced an output", expected={k: w[k] for k in keys},
                       got=None, hint=hint)
        for k in keys:
            if g[k] != w[k]:
                raise Fail(f"request {name!r}: `{k}` differs from the reference engine",
                           expected=w[k], got=g[k], hint=hint)
    if obs["unfinished"]:
        raise Fail("has_unfinished() is still True after every request ended", hint=hint)


def pool_full_at_end(obs, hint=None):
    if obs["free_end"] != obs["num_blocks"]:
        raise Fail("the KV pool is not full again after the trace", expected=obs["num_blocks"],
                   got=obs["free_end"], hint=hint or "Every ending must release the request's cache.")


def rows_per_step(obs) -> list[list]:
    """The log's rows [request, cached, new], grouped by the step whose forwards made them."""
    out, calls = [], iter(obs["log"])
    for step in obs["steps"]:
        out.append([row for _ in range(step["forwards"]) for row in next(calls, [])])
    return out


def overtakes(obs, trace: str) -> dict:
    """{name: how many requests that arrived after it were admitted while it waited}, read from
    the log: a request is admitted in a step whose forward has its row with 0 tokens cached (a
    prefill, or the recompute after a preemption), and waits in every step after its arrival in
    which it neither runs nor has ended. Arrival order is the trace's order of add_request calls."""
    arrivals = TRACES[trace]["arrivals"]
    seq = {name: i for i, (_, name, _) in enumerate(arrivals)}
    arrived = {name: at for at, name, _ in arrivals}
    ended = {name: r["finished_at"] for name, r in per_request(obs).items()}
    count = dict.fromkeys(seq, 0)
    for i, rows in enumerate(rows_per_step(obs)):
        here = {r[0] for r in rows}
        for new in {r[0] for r in rows if r[1] == 0 and r[0] in seq}:
            for name in seq:
                if (seq[name] < seq[new] and arrived[name] <= i and name not in here
                        and (ended.get(name) is None or ended[name] >= i)):
                    count[name] += 1
    return count


def case(name, *values, probe, visible=False, points=1):
    """One row of a case table: `values` for the test's parameters and the probe call (name, *plain args)."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, points=points)])
