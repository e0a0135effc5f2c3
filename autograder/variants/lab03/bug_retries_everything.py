"""Retries every rejected attempt: a cancelled request is generated again for a client
that has left, a forbidden tool is asked for again and again, and a filtered reply is
resampled until something slips past the filter."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"retries_record_their_reasons": ["cancelled_never_retried", "permission_never_retried",
                                                "content_filter_never_retried"]}


def accept_with_retries(attempt, *, schemas, allowed_tools, executor, max_attempts=3):
    if type(max_attempts) is not int or max_attempts < 1:
        raise ValueError(f"`max_attempts` must be an integer >= 1, got {max_attempts!r}.")
    attempts, reason = [], None
    for i in range(max_attempts):
        d = accept_tool_call(attempt(i, reason), schemas=schemas, allowed_tools=allowed_tools, executor=executor)
        why = d["finish_reason"] if d["stage"] == "finish_reason" else d["stage"]
        reason = why if not d["ok"] and i + 1 < max_attempts else None   # BUG: every rejection is retried
        attempts.append({"attempt": i, "finish_reason": d["finish_reason"], "stage": d["stage"], "ok": d["ok"],
                         "retry_reason": reason})
        if reason is None:
            break
    return {"ok": d["ok"], "attempts": attempts, "final": d}
