"""TPOT divided by the number of tokens n instead of the n - 1 gaps between them."""
from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, serve_request)

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["five_evenly_spaced_tokens", "uneven_gaps"]}


def latency_metrics(arrival_time, token_times):
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) or arrival_time != arrival_time \
            or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a finite number >= 0, got {arrival_time!r}.")
    if not token_times:
        raise ValueError("`token_times` must not be empty, got [].")
    for i, t in enumerate(token_times):
        if t != t or t in (float("inf"), float("-inf")):
            raise ValueError(f"`token_times[{i}]` must be finite, got {t!r}.")
        if t < (arrival_time if i == 0 else token_times[i - 1]):
            raise ValueError(f"`token_times` must be non-decreasing and start at or after arrival, got {t!r}.")
    n = len(token_times)
    return {"ttft": token_times[0] - arrival_time,
            "tpot": None if n == 1 else (token_times[-1] - token_times[0]) / n,
            "e2e": token_times[-1] - arrival_time}
