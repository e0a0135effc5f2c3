"""Holds back stop-string prefixes correctly while the run goes on, but the final flush
sends the rest of the RAW output, so the stop string (or a blocked token) leaks at the end."""
from course.generation import _start, holdback_length
from autograder.reference.lab03 import (accept_tool_call, accept_with_retries, first_stop, generate,  # noqa: F401
                                        log_failures, replay, validate_params)

EXPECT_FAIL = {"stream_holds_back_stop_prefixes": ["two_token_stop_never_leaks", "three_token_stop_never_leaks",
                                                   "stop_inside_one_token", "stream_equals_generate_on_every_fixture"]}


def stream_generate(model, input_ids, **kw):
    params = {"stop": None, "stop_token_ids": None, "include_stop_str_in_output": False, "sampler": None,
              "cancel": None, "clock": None, "deadline": None, "content_filter": None, **kw}
    p, steps = _start(model, input_ids, **params)
    stop = [] if p["include_stop_str_in_output"] else p["stop"]

    def deltas():
        sent = 0
        while True:
            try:
                raw = next(steps)
            except StopIteration as finished:
                rest = finished.value.raw_output[sent:]   # BUG: the raw text, not finished.value.text
                if rest:
                    yield rest
                return
            safe = len(raw) - holdback_length(raw, stop)
            if safe > sent:
                yield raw[sent:safe]
                sent = safe
    return deltas()
