"""Checks only that the two shapes match: float ids reach the model, and a negative,
NaN or infinite atol is used as given (nan compares False: nothing ever changes)."""
from autograder.reference.lab04 import (generate_cached, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"changed_positions_shows_causality": ["rejects_bad_ids_and_atol"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    if tuple(other_ids.shape) != tuple(input_ids.shape):
        raise ValueError(f"`other_ids` must have the shape {tuple(input_ids.shape)}, got {tuple(other_ids.shape)}.")
    a, b = model(input_ids)[0], model(other_ids)[0]     # BUG: no check of the ids or of atol
    return [t for t in range(a.shape[0]) if float((a[t] - b[t]).abs().max()) > atol]
