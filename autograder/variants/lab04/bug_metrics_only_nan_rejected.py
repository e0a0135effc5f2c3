"""Rejects NaN timestamps with math.isnan but lets +inf and -inf through, so an
infinite TTFT or end-to-end latency comes back as a number."""
import math

from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, serve_request)

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["rejects_nan_timestamp"]}


def latency_metrics(arrival_time, token_times):
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) or math.isnan(arrival_time) \
            or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a number >= 0, got {arrival_time!r}.")
    if not isinstance(token_times, (list, tuple)) or not token_times:
        raise ValueError(f"`token_times` must be a non-empty list, got {token_times!r}.")
    for i, t in enumerate(token_times):
        if math.isnan(t):                      # BUG: inf passes
            raise ValueError(f"`token_times[{i}]` must be a number, got {t!r}.")
        if t < (arrival_time if i == 0 else token_times[i - 1]):
            raise ValueError(f"`token_times` must be non-decreasing from arrival_time, got {t!r} at index {i}.")
    n = len(token_times)
    return {"ttft": token_times[0] - arrival_time,
            "tpot": None if n == 1 else (token_times[-1] - token_times[0]) / (n - 1),
            "e2e": token_times[-1] - arrival_time}
