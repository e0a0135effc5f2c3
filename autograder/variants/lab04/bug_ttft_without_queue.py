"""TTFT measured from the moment the loop started (start of prefill), not from the
request's arrival: the time it waited in the queue disappears from the number."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"serve_request_measures_from_arrival": ["ttft_includes_queue"]}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
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
    return {"tokens": tokens, "token_times": token_times,
            **latency_metrics(now, token_times)}               # BUG: from when work began, not arrival
