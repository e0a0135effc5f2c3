"""Rejects NaN timestamps with math.isnan but lets +inf and -inf through, so an
infinite TTFT or end-to-end latency comes back as a number."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["rejects_nan_timestamp"]}


def latency_metrics(arrival_time, token_times):
    def finite(name, x):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):   # BUG: inf passes
            raise ValueError(f"`{name}` must be a finite number, got {x!r}.")
        return float(x)

    arrival = finite("arrival_time", arrival_time)
    if arrival < 0:
        raise ValueError(f"`arrival_time` must be >= 0, got {arrival_time!r}.")
    if not isinstance(token_times, (list, tuple)):
        raise ValueError(f"`token_times` must be a list of timestamps, got {type(token_times).__name__}.")
    if not token_times:
        raise ValueError("`token_times` must hold at least one timestamp, got [].")
    times = [finite(f"token_times[{i}]", t) for i, t in enumerate(token_times)]
    if times[0] < arrival:
        raise ValueError(f"`token_times[0]` must be >= `arrival_time` ({arrival_time!r}), "
                         f"got {token_times[0]!r}.")
    for i in range(1, len(times)):
        if times[i] < times[i - 1]:
            raise ValueError(f"`token_times` must be non-decreasing, got {token_times[i]!r} after "
                             f"{token_times[i - 1]!r} at index {i}.")
    gaps = len(times) - 1
    return {"ttft": times[0] - arrival,
            "tpot": (times[-1] - times[0]) / gaps if gaps else None,
            "e2e": times[-1] - arrival}
