"""Reference for lab03 (from logit to finish reason): the course's production modules.

course.generation and course.acceptance are what later labs reuse, so the judges hold
students to exactly them. The helpers below turn a run into the plain data judges compare.
"""
from __future__ import annotations

from course import fixtures
from course.acceptance import (ALLOWED_TOOLS, TOOL_SCHEMAS, RecordingExecutor, accept_tool_call,  # noqa: F401
                               accept_with_retries, build_run, failure_record, log_failures, normalise_spec,
                               replay, run_spec)
from course.generation import (first_stop, generate, holdback_length, stream_generate,  # noqa: F401
                               validate_params)

FIELDS = ("tokens", "text", "finish_reason", "stop_reason", "usage", "raw_output")


def expected_run(spec: dict, clock_start: float = 0.0) -> dict:
    """The reference result of a run spec as plain data, with the number of model calls;
    the run's FakeClock first moved on to `clock_start` (the graders' clocks do not start at 0)."""
    model, input_ids, kwargs = build_run(spec)
    kwargs["clock"].advance(clock_start)
    r = generate(model, input_ids, **kwargs)
    out = {k: v for k, v in r.to_dict().items() if k in FIELDS}
    out["error"] = r.error
    out["calls"] = model.calls
    return out


def safe_emissions(spec: dict) -> list[str]:
    """E[k]: the text a stream must have sent once k tokens exist and the run goes on:
    the raw text of those k tokens minus the longest suffix that could still become a
    stop string (nothing is held with include_stop_str_in_output)."""
    s = normalise_spec(spec)
    p = validate_params(**s["params"])
    hold = [] if p["include_stop_str_in_output"] else p["stop"]
    fx = fixtures.load(s["fixture"])
    tokens = expected_run(spec)["tokens"]
    out = []
    for k in range(len(tokens) + 1):
        raw = fx.decode(tokens[:k])
        out.append(raw[:len(raw) - holdback_length(raw, hold)])
    return out


def expected_decision(spec: dict, *, schemas=None, allowed_tools=None, fail_with=None) -> dict:
    ex = RecordingExecutor(fail_with=fail_with)
    d = accept_tool_call(run_spec(spec), schemas=schemas or TOOL_SCHEMAS,
                         allowed_tools=ALLOWED_TOOLS if allowed_tools is None else allowed_tools, executor=ex)
    return {"decision": d, "calls": [[t, a] for t, a in ex.calls]}
