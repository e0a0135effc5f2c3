"""Treats a failed side effect like a parse error and tries the call again, so a tool that
failed half-way may run a second time."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"retries_record_their_reasons": ["execute_failure_never_retried"]}


def accept_with_retries(attempt, *, schemas, allowed_tools, executor, max_attempts=3):
    if type(max_attempts) is not int or max_attempts < 1:
        raise ValueError(f"`max_attempts` must be an integer >= 1, got {max_attempts!r}.")
    worth_retrying = {"length", "timeout", "error", "parse", "schema", "execute"}   # BUG: execute retried
    log, reason = [], None
    for i in range(max_attempts):
        d = accept_tool_call(attempt(i, reason), schemas=schemas, allowed_tools=allowed_tools, executor=executor)
        why = d["finish_reason"] if d["stage"] == "finish_reason" else d["stage"]
        last = i + 1 == max_attempts
        reason = why if (not d["ok"] and why in worth_retrying and not last) else None
        log.append({"attempt": i, "finish_reason": d["finish_reason"], "stage": d["stage"], "ok": d["ok"],
                    "retry_reason": reason})
        if reason is None:
            break
    return {"ok": d["ok"], "attempts": log, "final": d}
