"""Validates the deadline with math.isfinite, so deadline=inf (a number > 0: no
deadline at all) is rejected although the contract allows it."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"params_are_validated": ["accepts_boundary_values"]}


def validate_params(*, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False, deadline=None):
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    stop = [] if stop is None else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 16:
        raise ValueError(f"`stop` must be a list of at most 16 non-empty strings, got {stop!r}.")
    stop_token_ids = [] if stop_token_ids is None else stop_token_ids
    if not isinstance(stop_token_ids, list) or not all(type(t) is int and t >= 0 for t in stop_token_ids):
        raise ValueError(f"`stop_token_ids` must be a list of integers >= 0, got {stop_token_ids!r}.")
    if type(include_stop_str_in_output) is not bool:
        raise ValueError(f"`include_stop_str_in_output` must be True or False, got {include_stop_str_in_output!r}.")
    if deadline is not None and (type(deadline) not in (int, float) or not math.isfinite(deadline)  # BUG: inf
                                 or deadline <= 0):
        raise ValueError(f"`deadline` must be a finite number of seconds > 0, got {deadline!r}.")
    return {"max_tokens": max_tokens, "stop": list(stop), "stop_token_ids": list(stop_token_ids),
            "include_stop_str_in_output": include_stop_str_in_output, "deadline": deadline}
