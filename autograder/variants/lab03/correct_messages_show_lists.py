"""A correct validate_params whose messages show the whole value they got (the list of
17 stop strings, the list holding an empty string) rather than a count or an item;
every other function is the solution's."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

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
