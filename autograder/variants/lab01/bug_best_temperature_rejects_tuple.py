"""Accepts the temperatures only as a list, though the contract allows a tuple too.
(Nor does it check that `logits` is a 1-D tensor.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"best_temperature_is_found": ["argmax_token_best_at_zero"]}


def best_temperature_for_token(logits, token_id, temperatures):
    # BUG: no check that logits is a 1-D tensor
    n_tokens = logits.shape[0]
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < n_tokens:
        raise ValueError(f"`token_id` must be an integer in [0, {n_tokens - 1}], got {token_id!r}.")
    if not isinstance(temperatures, list) or len(temperatures) == 0:   # BUG: a tuple is allowed
        raise ValueError(f"`temperatures` must be a non-empty list of temperatures, got {temperatures!r}.")
    best = None
    for t in temperatures:
        p_token = softmax(apply_temperature(logits, t))[token_id].item()
        if best is None or p_token > best["probability"]:
            best = {"temperature": float(t), "probability": p_token}
    return best
