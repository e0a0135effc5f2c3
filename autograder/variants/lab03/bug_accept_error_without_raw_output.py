"""Says what was wrong in every rejection but leaves the raw output out of the error, so a
person reading the log cannot see what the model actually wrote."""
import json

import jsonschema

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"acceptance_runs_in_order": ["every_rejection_includes_the_raw_output"]}


def accept_tool_call(result, *, schemas, allowed_tools, executor):
    reason = str(result.finish_reason)

    def decision(stage, problem=None, call=None, value=None):
        return {"ok": problem is None, "stage": stage, "error": problem,   # BUG: no raw output in the error
                "finish_reason": reason, "raw_output": result.raw_output, "call": call, "value": value}

    if reason != "stop":
        return decision("finish_reason", f"Rejected: finish_reason is {reason!r}, the output is unfinished.")
    try:
        call = json.loads(result.text)
    except json.JSONDecodeError as e:
        return decision("parse", f"Rejected: not valid JSON ({e}).")
    envelope = {"type": "object", "required": ["tool", "args"], "additionalProperties": False,
                "properties": {"tool": {"enum": list(schemas)}, "args": {"type": "object"}}}
    try:
        jsonschema.validate(call, envelope)
        jsonschema.validate(call["args"], schemas[call["tool"]])
    except jsonschema.ValidationError as e:
        return decision("schema", f"Rejected: schema violation: {e.message}.", call)
    if call["tool"] not in allowed_tools:
        return decision("permission", f"Rejected: the tool {call['tool']!r} is not allowed.", call)
    try:
        value = executor(call["tool"], call["args"])
    except Exception as e:
        return decision("execute", f"The tool {call['tool']!r} failed: {type(e).__name__}: {e}.", call)
    return decision("execute", call=call, value=value)
