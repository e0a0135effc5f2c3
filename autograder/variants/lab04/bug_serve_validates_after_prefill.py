"""Starts generating first and checks arrival_time only when computing the metrics:
the error comes, but after the model has already done the work."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"serve_request_measures_from_arrival": ["rejects_arrival_in_the_future"]}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    now = clock()
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) \
            or not math.isfinite(arrival_time):
        raise ValueError(f"`arrival_time` must be a finite number, got {arrival_time!r}.")
    token_times = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                             on_token=lambda _token: token_times.append(clock()))
    if arrival_time > now:                                     # BUG: validated after the decoder ran
        raise ValueError(f"`arrival_time` must not be later than the clock's current time {now!r}, "
                         f"got {arrival_time!r}.")
    return {"tokens": tokens, "token_times": token_times, **latency_metrics(arrival_time, token_times)}
