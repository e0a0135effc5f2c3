"""Looks the tool up and validates only args against schemas[tool]: no envelope schema, so a
call with an extra key runs, and a call without args or one that is not an object raises."""
import json

import jsonschema

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"acceptance_runs_in_order": ["envelope_has_exactly_tool_and_object_args"]}


def accept_tool_call(result, *, schemas, allowed_tools, executor):
    reason = str(result.finish_reason)
    raw = result.raw_output

    def decision(stage, problem=None, call=None, value=None):
        return {"ok": problem is None, "stage": stage,
                "error": None if problem is None else f"{problem} Raw output: {raw!r}",
                "finish_reason": reason, "raw_output": raw, "call": call, "value": value}

    if reason != "stop":
        return decision("finish_reason", f"Rejected: the generation is unfinished (finish_reason={reason!r}).")
    try:
        call = json.loads(result.text)
    except json.JSONDecodeError as e:
        return decision("parse", f"Rejected: the output is not valid JSON ({e}).")
    if call["tool"] not in schemas:      # BUG: no envelope schema (extra keys, args' type, a non-object)
        return decision("schema", f"Rejected: unknown tool {call['tool']!r}.", call)
    try:
        jsonschema.validate(call["args"], schemas[call["tool"]])
    except jsonschema.ValidationError as e:
        return decision("schema", f"Rejected: the tool call does not match its schema: {e.message}.", call)
    if call["tool"] not in allowed_tools:
        return decision("permission", f"Rejected: the tool {call['tool']!r} is not on the allow-list.", call)
    try:
        value = executor(call["tool"], call["args"])
    except Exception as e:
        return decision("execute", f"The tool {call['tool']!r} failed: {type(e).__name__}: {e}.", call)
    return decision("execute", call=call, value=value)
