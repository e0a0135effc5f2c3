"""Writes the failure log with open(path, "w"): each call replaces the earlier
failures instead of appending to them."""
import json

from course.acceptance import failure_record
from autograder.reference.lab03 import (accept_tool_call, accept_with_retries, first_stop, generate,  # noqa: F401
                                        holdback_length, replay, stream_generate, validate_params)

EXPECT_FAIL = {"failures_are_logged_and_replayed": ["saved_file_equals_returned_records"]}


def log_failures(specs, path):
    records = []
    for spec in specs:
        result = replay(spec)
        if str(result.finish_reason) != "stop":
            records.append(json.loads(json.dumps(failure_record(spec, result))))
    with open(path, "w", encoding="utf-8") as f:   # BUG: "w" truncates the log
        for r in records:
            f.write(json.dumps(r) + "\n")
    return records
