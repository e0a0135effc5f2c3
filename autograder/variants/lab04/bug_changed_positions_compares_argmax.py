"""Compares the greedy token at each position instead of the logits: a position
whose logits moved but whose argmax did not is missed."""
from autograder.reference.lab04 import (generate_cached, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"changed_positions_shows_causality": ["non_causal_model_changes_everywhere"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have shape {tuple(input_ids.shape)}, got {tuple(other_ids.shape)}.")
    a = model(input_ids)[0].argmax(dim=-1)  # BUG: only the best token, not the logits
    b = model(other_ids)[0].argmax(dim=-1)
    return [t for t in range(a.numel()) if int(a[t]) != int(b[t])]
