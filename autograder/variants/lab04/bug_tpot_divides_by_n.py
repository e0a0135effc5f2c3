"""TPOT divided by the number of tokens n instead of the n - 1 gaps between them.
(Nor does it reject a bool timestamp.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"latency_metrics_ttft_tpot": ["five_evenly_spaced_tokens", "uneven_gaps"]}

_latency_metrics = latency_metrics   # the solution's, kept before it is replaced (serve_request uses it)


def latency_metrics(arrival_time, token_times):
    def finite(name, x):
        if not isinstance(x, (int, float)) or not math.isfinite(x):   # BUG: True passes as 1
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
            "tpot": (times[-1] - times[0]) / len(times) if gaps else None,   # BUG: n, not the n - 1 gaps
            "e2e": times[-1] - arrival}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    # the solution's, on the solution's latency_metrics: the bug stays in latency_metrics alone
    now = clock()
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) \
            or not math.isfinite(arrival_time):
        raise ValueError(f"`arrival_time` must be a finite number, got {arrival_time!r}.")
    if arrival_time > now:
        raise ValueError(f"`arrival_time` must not be later than the clock's current time {now!r}, "
                         f"got {arrival_time!r}.")
    token_times = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                             on_token=lambda _token: token_times.append(clock()))
    return {"tokens": tokens, "token_times": token_times, **_latency_metrics(arrival_time, token_times)}
