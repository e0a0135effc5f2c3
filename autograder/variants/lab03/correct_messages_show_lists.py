"""A correct validate_params whose messages show the whole value they got (the list of
17 stop strings, the list holding an empty string) rather than a count or an item;
every other function calls the course's (a function imported from the course would be
refused: the graders take only functions written in the notebook)."""
import math

from autograder.reference import lab03 as _course

EXPECT_FAIL = {}


def validate_params(*, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False, deadline=None):
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be a positive int; you passed {max_tokens!r}")
    if stop is not None:
        if type(stop) is not list or len(stop) > 16 or any(type(s) is not str or s == "" for s in stop):
            raise ValueError(f"`stop` must be a list of 1..16 non-empty strings; you passed {stop!r}")
    if stop_token_ids is not None:
        if type(stop_token_ids) is not list or any(type(t) is not int or t < 0 for t in stop_token_ids):
            raise ValueError(f"`stop_token_ids` must be a list of ids >= 0; you passed {stop_token_ids!r}")
    if include_stop_str_in_output not in (True, False) or type(include_stop_str_in_output) is not bool:
        raise ValueError(f"`include_stop_str_in_output` must be a bool; you passed {include_stop_str_in_output!r}")
    if deadline is not None and (type(deadline) not in (int, float) or math.isnan(deadline) or not deadline > 0):
        raise ValueError(f"`deadline` must be a positive number of seconds; you passed {deadline!r}")
    return {"max_tokens": max_tokens, "stop": list(stop or []), "stop_token_ids": list(stop_token_ids or []),
            "include_stop_str_in_output": include_stop_str_in_output, "deadline": deadline}


def first_stop(text, stop):
    return _course.first_stop(text, stop)


def holdback_length(text, stop):
    return _course.holdback_length(text, stop)


def generate(model, input_ids, **kwargs):
    return _course.generate(model, input_ids, **kwargs)


def stream_generate(model, input_ids, **kwargs):
    return _course.stream_generate(model, input_ids, **kwargs)


def accept_tool_call(result, **kwargs):
    return _course.accept_tool_call(result, **kwargs)


def accept_with_retries(attempt, **kwargs):
    return _course.accept_with_retries(attempt, **kwargs)


def replay(record):
    return _course.replay(record)


def log_failures(specs, path):
    return _course.log_failures(specs, path)
