"""lab03's probes: they run in the student's process and return plain data. No reference here.

Each probe builds its inputs (_inputs.py: run specs, `build`, the course loop's results and
the input tables by case), calls the student's code and records what happened. The tests
name a case by its key into those tables and read the same tables to judge the same calls.
A probe is a public function whose first parameter is `ns` (the student's namespace).
"""
from __future__ import annotations

import copy
import json
import os
import tempfile
from enum import Enum

import course
from course.runs import ALLOWED_TOOLS, TOOL_SCHEMAS, GenerationResult, RecordingExecutor

from autograder.checks import Input, record
from autograder.core import Fail, function, raised

# the tables and run helpers; the tests and the package's __init__ import them from here too
from ._inputs import (ACCEPT_TEXTS, ACCEPTS, BAD_GENERATE_PARAMS, BAD_PARAMS, CLOCK_START, COURSE_RUN_SPECS,  # noqa: F401
                      DEFAULT_RUNS, FAILURE_SPECS, FN_CALLS, OK, REPLAYS, RETRIES, RUN_LABELS, RUNS, STOP3, STREAMS, VALID_PARAMS,
                      S, _fixture_specs, build, course_result, plain_result, run_key, written_result)

# ================================================================= probes

def params(ns, key: str) -> list:
    """validate_params(**kwargs) for each call of VALID_PARAMS[key] (or of BAD_PARAMS[key]), recorded."""
    calls = VALID_PARAMS[key] if key in VALID_PARAMS else BAD_PARAMS[key][1]
    fn = function(ns, "validate_params")
    # a deep copy: a student who changes a list argument in place cannot change what the judge sees
    return [record(fn, i.args(), copy.deepcopy(dict(i.kwargs))) for i in (Input("", lambda: (), kw) for kw in calls)]


def fn_calls(ns, key: str) -> list:
    """first_stop or holdback_length (the part of `key` before the slash) on each FN_CALLS[key] call."""
    fn = function(ns, key.split("/")[0])
    out = []
    for args in FN_CALLS[key]:
        try:
            v = fn(*copy.deepcopy(args))
            out.append(list(v) if isinstance(v, tuple) else v)
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            out.append(raised(e))
    return out


def _call_generate(ns, spec, defaults=False):
    fn = function(ns, "generate")
    model, input_ids, kwargs = build(spec)
    if defaults:  # only the stopping parameters: sampler, cancel, clock and content_filter left out
        kwargs = {k: kwargs[k] for k in spec["params"]}
    before = input_ids.clone()
    try:
        r = fn(model, input_ids, **kwargs)
    except NotImplementedError:  # a stub: reported as 'not implemented yet'
        raise
    except Exception as e:
        return {"result": raised(e), "calls": model.calls, "unchanged": bool((input_ids == before).all())}
    return {"result": plain_result(r), "calls": model.calls,
            "unchanged": bool(input_ids.shape == before.shape and (input_ids == before).all())}


def runs(ns, key: str) -> list:
    """generate on every run spec of RUNS[key]."""
    return [_call_generate(ns, s) for s in RUNS[key]]


def runs_with_defaults(ns, key: str) -> list:
    """generate on every run spec of DEFAULT_RUNS[key], called with its stopping parameters only."""
    return [_call_generate(ns, s, defaults=True) for s in DEFAULT_RUNS[key]]


def generate_validates(ns) -> list:
    fn = function(ns, "generate")
    out = []
    for kw in BAD_GENERATE_PARAMS:
        m = course.ScriptedModel("eos_at_step_3")
        try:
            fn(m, m.prompt(), **kw)
            out.append({"raised": None, "calls": m.calls})
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            out.append({"raised": raised(e), "calls": m.calls})
    return out


class _Spy:
    """Model wrapper that notes what the consumer had received when each call began."""

    def __init__(self, model, received):
        self.model, self.received, self.seen = model, received, []

    vocab = property(lambda self: self.model.vocab)
    vocab_size = property(lambda self: self.model.vocab_size)
    eos_token_id = property(lambda self: self.model.eos_token_id)

    def decode(self, ids):
        return self.model.decode(ids)

    def __call__(self, input_ids):
        self.seen.append("".join(self.received))
        return self.model(input_ids)


def streams(ns, key: str) -> list:
    """stream_generate on every run spec of STREAMS[key]: the deltas, how many model calls had
    begun at each, and what the client had received when each call began."""
    fn = function(ns, "stream_generate")
    out = []
    for spec in STREAMS[key]:
        model, input_ids, kwargs = build(spec)
        received, at_yield, bad = [], [], []
        spy = _Spy(model, received)
        try:
            for delta in fn(spy, input_ids, **kwargs):
                if type(delta) is not str:
                    bad.append(type(delta).__name__)
                    delta = str(delta)
                received.append(delta)
                at_yield.append(len(spy.seen))
                if len(received) > 2000:
                    break
            err = None
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            err = raised(e)
        out.append({"deltas": list(received), "at_yield": at_yield, "seen": spy.seen, "bad": bad, "raised": err})
    return out


def _plain_decision(d):
    if not isinstance(d, dict):
        raise Fail(f"accept_tool_call should return a dict, got {type(d).__name__}",
                   hint='Return {"ok": ..., "stage": ..., "error": ..., "raw_output": ..., ...}.')
    missing = [k for k in ("ok", "stage", "error", "raw_output") if k not in d]
    if missing:
        raise Fail(f"the decision has no {missing}", hint="Keep every key of the contract.")
    out = {k: d[k] for k in ("ok", "stage", "error", "raw_output")}
    if isinstance(out["stage"], Enum):
        out["stage"] = out["stage"].value
    return out


def accepts(ns, key: str) -> list:
    """accept_tool_call on the course result of each ACCEPTS[key] run, with its schemas,
    allow-list and executor: the decision and the executor's calls."""
    fn = function(ns, "accept_tool_call")
    out = []
    for spec, schemas, allowed, fail_with in ACCEPTS[key]:
        ex = RecordingExecutor(fail_with=fail_with)
        result = course_result(spec)  # the course loop's result: this test does not depend on generate
        try:
            d = _plain_decision(fn(result, schemas=copy.deepcopy(schemas or TOOL_SCHEMAS),
                                   allowed_tools=list(ALLOWED_TOOLS if allowed is None else allowed),
                                   executor=ex))
        except Fail:
            raise
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            d = raised(e)
        out.append({"decision": d, "calls": [[t, a] for t, a in ex.calls]})
    return out


def accepts_texts(ns, key: str) -> list:
    """accept_tool_call on a finished result with each hand-written text of ACCEPT_TEXTS[key]."""
    fn = function(ns, "accept_tool_call")
    out = []
    for text in ACCEPT_TEXTS[key]:
        ex = RecordingExecutor()
        try:
            d = _plain_decision(fn(GenerationResult.from_dict(written_result(text)),
                                   schemas=copy.deepcopy(TOOL_SCHEMAS), allowed_tools=list(ALLOWED_TOOLS),
                                   executor=ex))
        except Fail:
            raise
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            d = raised(e)
        out.append({"decision": d, "calls": [[t, a] for t, a in ex.calls]})
    return out


def retries(ns, key: str) -> dict:
    """accept_with_retries over the course results of RETRIES[key]'s attempts."""
    plan, max_attempts, *fail_with = RETRIES[key]
    fn = function(ns, "accept_with_retries")
    reasons, ex = [], RecordingExecutor(fail_with=fail_with[0] if fail_with else None)

    def attempt(i, reason):
        reasons.append(reason)
        return course_result(plan[min(i, len(plan) - 1)])
    try:
        out = fn(attempt, schemas=copy.deepcopy(TOOL_SCHEMAS), allowed_tools=list(ALLOWED_TOOLS), executor=ex,
                 max_attempts=max_attempts)
    except NotImplementedError:  # a stub: reported as 'not implemented yet'
        raise
    except Exception as e:
        return {"out": raised(e), "reasons": reasons, "calls": len(ex.calls)}
    if not isinstance(out, dict) or "attempts" not in out:
        raise Fail("accept_with_retries should return a dict with 'ok', 'attempts' and 'final'")
    attempts = [{k: a.get(k) for k in ("attempt", "finish_reason", "stage", "ok", "retry_reason")}
                for a in out["attempts"]]
    for a in attempts:
        for k in ("finish_reason", "stage"):
            if isinstance(a[k], Enum):
                a[k] = a[k].value
    return {"out": {"ok": out.get("ok"), "attempts": attempts}, "reasons": reasons, "calls": len(ex.calls)}


def bad_attempts(ns):
    fn = function(ns, "accept_with_retries")
    try:
        fn(lambda i, r: course_result(OK), schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS,
           executor=RecordingExecutor(), max_attempts=0)
    except NotImplementedError:  # a stub: reported as 'not implemented yet'
        raise
    except Exception as e:
        return raised(e)
    return None


def replays(ns, key: str) -> list:
    """replay(spec) for every spec of REPLAYS[key]."""
    fn = function(ns, "replay")
    out = []
    for spec in REPLAYS[key]:
        try:
            out.append({"result": plain_result(fn(copy.deepcopy(spec)))})
        except Fail:
            raise
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            out.append({"result": raised(e)})
    return out


def _read_json_lines(path):
    """(records, problems) of a JSON Lines file: one record per non-blank line."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    saved, bad = [], []
    for line in lines:
        try:
            saved.append(json.loads(line))
        except json.JSONDecodeError as e:
            bad.append(f"{e.msg}: {line[:80]}")
    return saved, bad


def failure_log(ns) -> dict:
    """log_failures(FAILURE_SPECS, path): what it returned, the file's records, and replay of each."""
    log = function(ns, "log_failures")
    rep = function(ns, "replay")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "failures.jsonl")
        try:
            returned = log(copy.deepcopy(FAILURE_SPECS), path)
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            return {"raised": raised(e)}
        saved, bad = _read_json_lines(path) if os.path.exists(path) else ([], [])
    replayed = []
    for rec in saved:
        try:
            replayed.append(plain_result(rep(copy.deepcopy(rec))))
        except Fail:
            raise
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            replayed.append(raised(e))
    try:
        returned_plain = json.loads(json.dumps(returned))
    except (TypeError, ValueError):
        returned_plain = {"__not_json__": repr(returned)[:200]}
    return {"raised": None, "returned": returned_plain, "saved": saved, "bad_lines": bad, "replays": replayed}


def log_twice(ns) -> dict:
    """Two calls on one path: the second appends (the log is persistent state across calls)."""
    log = function(ns, "log_failures")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "failures.jsonl")
        returned = []
        for part in (FAILURE_SPECS[:4], FAILURE_SPECS[4:]):
            try:
                returned.append(json.loads(json.dumps(log(copy.deepcopy(part), path))))
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:  # not JSON-ready records are a failure too
                return {"raised": raised(e)}
        saved, bad = _read_json_lines(path)
    return {"raised": None, "returned": returned, "saved": saved, "bad_lines": bad}
