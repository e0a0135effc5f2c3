"""Structured-output acceptance, and failure samples with replay. Defined in lab03.

Acceptance runs in a fixed order and stops at the first stage that says no:

    finish_reason   only `stop` goes on: `length`/`cancelled`/... may hold half an object
    parse           json.loads of result.text
    schema          jsonschema: the call envelope, then the tool's own argument schema
    permission      the tool must be on the allow-list
    execute         only now does the side effect run, through the executor

Every decision is a plain dict with the raw output attached, so a person can read why.

Failure samples: a *run spec* is plain data that fully describes one generation on a
fixture (parameters, seed, injected failures); `run_spec` runs it, `log_failures` writes
every abnormal ending as one JSON line (the spec plus what came out), and `replay`
reruns a saved line and gets the same tokens, text and finish reason.

The tools (TOOL_SCHEMAS, ALLOWED_TOOLS), RecordingExecutor and InjectedModel are
scaffolding, not answers: they live in course.runs and are re-exported here.
"""
from __future__ import annotations

ANSWERS_FOR = "lab03"  # the grader hides this module while lab03 (or an earlier lab) is graded

import copy
import json
import threading

import jsonschema
import torch

from . import fixtures as _fixtures
from ._checks import check_int
from .clock import FakeClock
from .finish import FinishReason
from .generation import generate
from .scripted import ScriptedModel
# the scaffolding (no answers) lives in course.runs; re-exported here for the labs after Lab 03
from .runs import (ALLOWED_TOOLS, INJECT_DEFAULTS, SPEC_KEYS, TOOL_SCHEMAS, GenerationResult,  # noqa: F401
                   InjectedModel, RecordingExecutor, greedy_sampler, seeded_sampler)

STAGES = ("finish_reason", "parse", "schema", "permission", "execute")
WHY_UNFINISHED = {
    "length": "max_tokens cut it off, so it may end mid-object",
    "cancelled": "the client cancelled it part-way",
    "timeout": "its deadline passed part-way",
    "content_filter": "a content filter blocked it",
    "error": "the model failed part-way",
}


def call_schema(schemas: dict) -> dict:
    """The JSON schema of a tool call {"tool": name, "args": {...}} for these tools."""
    return {"type": "object", "required": ["tool", "args"], "additionalProperties": False,
            "properties": {"tool": {"enum": sorted(schemas)}, "args": {"type": "object"}}}


def _decision(result, stage, error=None, call=None, value=None) -> dict:
    return {"ok": error is None and stage == "execute", "stage": stage, "error": error,
            "finish_reason": str(result.finish_reason), "raw_output": result.raw_output,
            "call": call, "value": value}


def accept_tool_call(result: GenerationResult, *, schemas: dict, allowed_tools, executor) -> dict:
    """Run the acceptance stages on one result; call `executor(tool, args)` only if all pass.

    Returns {"ok", "stage", "error", "finish_reason", "raw_output", "call", "value"}:
    `stage` is the stage that rejected (or "execute" when the call ran), `error` a
    sentence for a person (None on success), `value` what the executor returned.
    """
    fr = str(result.finish_reason)
    raw = result.raw_output
    if fr != "stop":
        return _decision(result, "finish_reason",
                         f"Not accepted: the generation ended with finish_reason '{fr}', not 'stop': "
                         f"{WHY_UNFINISHED.get(fr, 'it did not finish')}. Nothing was parsed or run. "
                         f"Raw output: {raw!r}")
    try:
        call = json.loads(result.text)
    except json.JSONDecodeError as e:
        return _decision(result, "parse", f"Not accepted: the output is not valid JSON ({e.msg} at "
                                          f"character {e.pos}). Raw output: {raw!r}")
    prefix = []
    try:
        jsonschema.validate(call, call_schema(schemas))           # the envelope names the tool...
        prefix = ["args"]
        jsonschema.validate(call["args"], schemas[call["tool"]])  # ...whose argument schema applies
    except jsonschema.ValidationError as e:
        where = ".".join(str(p) for p in prefix + list(e.absolute_path)) or "the call"
        return _decision(result, "schema", f"Not accepted: the tool call breaks its schema at {where}: "
                                           f"{e.message}. Raw output: {raw!r}", call=call)
    if call["tool"] not in allowed_tools:
        return _decision(result, "permission",
                         f"Not accepted: the tool '{call['tool']}' is not allowed here (allowed: "
                         f"{', '.join(allowed_tools)}). Raw output: {raw!r}", call=call)
    try:
        value = executor(call["tool"], call["args"])
    except Exception as e:
        return _decision(result, "execute", f"The tool '{call['tool']}' failed: {type(e).__name__}: {e}. "
                                            f"Raw output: {raw!r}", call=call)
    return _decision(result, "execute", call=call, value=value)


RETRY_FINISH_REASONS = ("length", "timeout", "error")  # a fresh attempt may well succeed
RETRY_STAGES = ("parse", "schema")                      # the model may get it right next time


def retry_reason(decision: dict) -> str | None:
    """Why this decision deserves another attempt, or None when it must not be retried:
    accepted; cancelled (the client left); content_filter (show a refusal instead);
    permission (a policy answer, not a glitch); execute (the side effect may have run)."""
    if decision["ok"]:
        return None
    if decision["stage"] == "finish_reason":
        return decision["finish_reason"] if decision["finish_reason"] in RETRY_FINISH_REASONS else None
    return decision["stage"] if decision["stage"] in RETRY_STAGES else None


def accept_with_retries(attempt, *, schemas, allowed_tools, executor, max_attempts: int = 3) -> dict:
    """attempt(i, reason) -> GenerationResult, for i = 0, 1, ...; reason is None first, then
    the retry reason of the attempt before. Returns {"ok", "attempts", "final"}: one entry
    per attempt {"attempt", "finish_reason", "stage", "ok", "retry_reason"}, and the last
    decision."""
    check_int("max_attempts", max_attempts, 1)
    log, reason = [], None
    for i in range(max_attempts):
        decision = accept_tool_call(attempt(i, reason), schemas=schemas, allowed_tools=allowed_tools,
                                    executor=executor)
        reason = retry_reason(decision) if i + 1 < max_attempts else None
        log.append({"attempt": i, "finish_reason": decision["finish_reason"], "stage": decision["stage"],
                    "ok": decision["ok"], "retry_reason": reason})
        if reason is None:
            break
    return {"ok": decision["ok"], "attempts": log, "final": decision}


# ---------------------------------------------------------------- run specs, failure samples, replay

def normalise_spec(spec: dict) -> dict:
    """A complete, JSON-ready copy of a run spec: the fixture's prompt when none is given,
    every injection key present."""
    if not isinstance(spec, dict) or "fixture" not in spec:
        raise ValueError(f"`spec` must be a dict with at least a 'fixture' key, got {spec!r}.")
    fx = _fixtures.load(spec["fixture"])
    inject = dict(INJECT_DEFAULTS)
    unknown = set(spec.get("inject") or {}) - set(INJECT_DEFAULTS)
    if unknown:
        raise ValueError(f"`spec['inject']` has unknown keys {sorted(unknown)}; known: {sorted(INJECT_DEFAULTS)}.")
    inject.update(spec.get("inject") or {})
    prompt = spec.get("prompt_ids")
    return {"fixture": fx.name, "prompt_ids": list(fx.prompt_ids if prompt is None else prompt),
            "params": copy.deepcopy(dict(spec.get("params") or {})), "seed": spec.get("seed"),
            "inject": copy.deepcopy(inject)}


def build_run(spec: dict):
    """(model, input_ids, kwargs) for generate(model, input_ids, **kwargs), built from a spec."""
    s = normalise_spec(spec)
    inj = s["inject"]
    fx = _fixtures.load(s["fixture"])
    clock, cancel = FakeClock(), threading.Event()
    model = InjectedModel(ScriptedModel(fx, raise_at=inj["raise_at"], nan_at=inj["nan_at"]),
                          prompt_len=len(fx.prompt_ids), cancel=cancel, cancel_at=inj["cancel_at"],
                          clock=clock, seconds_per_call=inj["seconds_per_call"])
    words, ids = list(inj["banned_words"]), set(inj["banned_token_ids"])
    content_filter = None
    if words or ids:
        def content_filter(token_id, text):
            return token_id in ids or any(w in text for w in words)
    kwargs = dict(s["params"], sampler=greedy_sampler if s["seed"] is None else seeded_sampler(s["seed"]),
                  cancel=cancel, clock=clock, content_filter=content_filter)
    return model, torch.tensor([s["prompt_ids"]], dtype=torch.long), kwargs


def run_spec(spec: dict, generate_fn=generate) -> GenerationResult:
    """Run the generation a spec describes (with `generate_fn`, the course loop by default)."""
    model, input_ids, kwargs = build_run(spec)
    return generate_fn(model, input_ids, **kwargs)


def failure_record(spec: dict, result: GenerationResult) -> dict:
    """One JSON-ready line of the failure log: the normalised spec plus the outcome."""
    out = result.to_dict()
    return {**normalise_spec(spec), **{k: out[k] for k in ("tokens", "text", "raw_output", "finish_reason",
                                                           "stop_reason", "usage", "error")}}


def log_failures(specs, path) -> list[dict]:
    """Run each spec; append a JSON line to `path` for every run that did not end with
    `stop`. Returns the records written, in order."""
    records = []
    with open(path, "a", encoding="utf-8") as f:
        for spec in specs:
            result = run_spec(spec)
            if result.finish_reason is not FinishReason.STOP:
                record = failure_record(spec, result)
                f.write(json.dumps(record, sort_keys=True) + "\n")
                records.append(record)
    return records


def read_failures(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def replay(record: dict) -> GenerationResult:
    """Rerun a saved failure (only its spec part is used)."""
    return run_spec({k: record[k] for k in SPEC_KEYS if k in record})
