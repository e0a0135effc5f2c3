"""Starts generating first and checks arrival_time only when computing the metrics:
the error comes, but after the model has already done the work."""
from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, latency_metrics)


EXPECT_FAIL = {"serve_request_measures_from_arrival": ["rejects_arrival_in_the_future"]}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    start = clock()
    times = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                             on_token=lambda t: times.append(clock()))
    if arrival_time > start:  # BUG: validated after the decoder ran
        raise ValueError(f"`arrival_time` must not be later than the clock at the start {start!r}, "
                         f"got {arrival_time!r}.")
    return {"tokens": tokens, "token_times": times, **latency_metrics(arrival_time, times)}
