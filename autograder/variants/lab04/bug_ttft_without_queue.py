"""TTFT measured from the moment the loop started (start of prefill), not from the
request's arrival: the time it waited in the queue disappears from the number."""
from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        generate_uncached, latency_metrics)

EXPECT_FAIL = {"serve_request_measures_from_arrival": ["ttft_includes_queue"]}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    if arrival_time > clock():
        raise ValueError(f"`arrival_time` must not be in the future, got {arrival_time!r}.")
    start = clock()  # BUG: the clock when work begins, not when the request arrived
    times = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                             on_token=lambda t: times.append(clock()))
    return {"tokens": tokens, "token_times": times, **latency_metrics(start, times)}
