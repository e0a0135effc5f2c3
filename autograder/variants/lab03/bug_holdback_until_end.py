"""Plays safe by not streaming at all when stop strings are set: it waits for the whole
generation and sends the final text in one piece. Nothing leaks, but the client sees
nothing until the end, even text that could never become a stop string."""
from autograder.reference.lab03 import (accept_tool_call, accept_with_retries, first_stop, generate,  # noqa: F401
                                        holdback_length, log_failures, replay, validate_params)
from autograder.reference.lab03 import stream_generate as _stream

EXPECT_FAIL = {"stream_holds_back_stop_prefixes": ["two_token_stop_never_leaks", "diverging_match_is_released"]}


def stream_generate(model, input_ids, **kwargs):
    if kwargs.get("stop"):
        yield generate(model, input_ids, **kwargs).text
        return
    yield from _stream(model, input_ids, **kwargs)
