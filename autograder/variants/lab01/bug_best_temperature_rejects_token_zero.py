"""Checks the token id with `0 < token_id` instead of `0 <= token_id`, so the first
token of the vocabulary (id 0) is rejected as out of range."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference.lab01 import apply_temperature, softmax

EXPECT_FAIL = {"best_temperature_is_found": ["argmax_token_best_at_zero"]}


def best_temperature_for_token(logits, token_id, temperatures):
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 < token_id < logits.shape[-1]:  # BUG
        raise ValueError(f"`token_id` must be a valid id, got {token_id!r}.")
    if not isinstance(temperatures, (list, tuple)) or not temperatures:
        raise ValueError(f"`temperatures` must be a non-empty list or tuple, got {temperatures!r}.")
    probs = [float(softmax(apply_temperature(logits, t))[token_id]) for t in temperatures]
    best = max(range(len(probs)), key=lambda i: (probs[i], -i))
    return {"temperature": float(temperatures[best]), "probability": probs[best]}
