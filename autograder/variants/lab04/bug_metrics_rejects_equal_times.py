"""Demands strictly increasing timestamps, so two tokens delivered at the same
instant (allowed by the contract) are rejected."""
import math

from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, serve_request)

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["equal_timestamps_allowed"]}


def latency_metrics(arrival_time, token_times):
    if not isinstance(arrival_time, (int, float)) or not math.isfinite(arrival_time) or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a finite number >= 0, got {arrival_time!r}.")
    if len(token_times) == 0:
        raise ValueError("`token_times` must not be empty, got [].")
    previous = arrival_time
    for i, t in enumerate(token_times):
        if not math.isfinite(t):
            raise ValueError(f"`token_times[{i}]` must be finite, got {t!r}.")
        if t < previous or (i > 0 and t == previous):  # BUG: equal times are allowed
            raise ValueError(f"`token_times` must increase, got {t!r} after {previous!r}.")
        previous = t
    n = len(token_times)
    return {"ttft": token_times[0] - arrival_time,
            "tpot": (token_times[-1] - token_times[0]) / (n - 1) if n > 1 else None,
            "e2e": token_times[-1] - arrival_time}
