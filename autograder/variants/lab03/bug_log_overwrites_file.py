"""Writes the failure log with open(path, "w"): each call replaces the earlier
failures instead of appending to them."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"failures_are_logged_and_replayed": ["saved_file_equals_returned_records"]}


def log_failures(specs, path):
    written = []
    with open(path, "w", encoding="utf-8") as sink:   # BUG: "w" truncates the log
        for spec in specs:
            outcome = replay(spec)
            if outcome.finish_reason == FinishReason.STOP:
                continue
            prompt = spec.get("prompt_ids")
            record = {"fixture": spec["fixture"],
                      "prompt_ids": list(course.load_fixture(spec["fixture"]).prompt_ids if prompt is None else prompt),
                      "params": dict(spec.get("params") or {}), "seed": spec.get("seed"),
                      "inject": dict(spec.get("inject") or {}),
                      "tokens": list(outcome.tokens), "text": outcome.text, "raw_output": outcome.raw_output,
                      "finish_reason": str(outcome.finish_reason), "stop_reason": outcome.stop_reason,
                      "usage": dict(outcome.usage), "error": outcome.error}
            sink.write(json.dumps(record, sort_keys=True) + "\n")
            written.append(record)
    return written
