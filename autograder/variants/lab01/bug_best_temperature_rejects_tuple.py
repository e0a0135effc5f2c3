"""Accepts the temperatures only as a list, though the contract allows a tuple too."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference.lab01 import apply_temperature, softmax

EXPECT_FAIL = {"best_temperature_is_found": ["argmax_token_best_at_zero"]}


def best_temperature_for_token(logits, token_id, temperatures):
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < logits.shape[-1]:
        raise ValueError(f"`token_id` must be a valid id, got {token_id!r}.")
    if not isinstance(temperatures, list) or not temperatures:   # BUG: a tuple is allowed
        raise ValueError(f"`temperatures` must be a non-empty list, got {temperatures!r}.")
    probs = [float(softmax(apply_temperature(logits, t))[token_id]) for t in temperatures]
    best = max(range(len(probs)), key=lambda i: (probs[i], -i))
    return {"temperature": float(temperatures[best]), "probability": probs[best]}
