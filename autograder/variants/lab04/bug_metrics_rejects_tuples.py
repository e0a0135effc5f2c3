"""Accepts only a list of timestamps, though the contract allows a tuple too."""
import math

from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, serve_request)

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["uneven_gaps"]}


def latency_metrics(arrival_time, token_times):
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) \
            or not math.isfinite(arrival_time) or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a finite number >= 0, got {arrival_time!r}.")
    if not isinstance(token_times, list):      # BUG: a tuple is allowed
        raise ValueError(f"`token_times` must be a list, got {type(token_times).__name__}.")
    if not token_times:
        raise ValueError("`token_times` must not be empty, got [].")
    for i, t in enumerate(token_times):
        if not math.isfinite(t):
            raise ValueError(f"`token_times[{i}]` must be finite, got {t!r}.")
        if t < (arrival_time if i == 0 else token_times[i - 1]):
            raise ValueError(f"`token_times` must be non-decreasing from arrival_time, got {t!r} at index {i}.")
    n = len(token_times)
    return {"ttft": token_times[0] - arrival_time,
            "tpot": None if n == 1 else (token_times[-1] - token_times[0]) / (n - 1),
            "e2e": token_times[-1] - arrival_time}
