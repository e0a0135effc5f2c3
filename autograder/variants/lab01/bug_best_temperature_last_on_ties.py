"""Keeps the last temperature on ties (>= instead of >): a token with probability 0 at
every T is reported at the largest T, not the first one listed."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"best_temperature_is_found": ["masked_token_never_likely"]}


def best_temperature_for_token(logits, token_id, temperatures):
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < logits.shape[-1]:
        raise ValueError(f"`token_id` must be a valid id, got {token_id!r}.")
    if not temperatures:
        raise ValueError(f"`temperatures` must not be empty, got {temperatures!r}.")
    best_t, best_p = None, -1.0
    for t in temperatures:
        p = float(softmax(apply_temperature(logits, t))[token_id])
        if p >= best_p:
            best_t, best_p = float(t), p
    return {"temperature": best_t, "probability": best_p}
