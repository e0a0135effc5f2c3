"""Keeps the last temperature on ties (>= instead of >): a token with probability 0 at
every T is reported at the largest T, not the first one listed. (Nor does it check that
`logits` is a 1-D tensor.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"best_temperature_is_found": ["masked_token_never_likely"]}


def best_temperature_for_token(logits, token_id, temperatures):
    # BUG: no check that logits is a 1-D tensor
    n_tokens = logits.shape[0]
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < n_tokens:
        raise ValueError(f"`token_id` must be an integer in [0, {n_tokens - 1}], got {token_id!r}.")
    if not isinstance(temperatures, (list, tuple)) or len(temperatures) == 0:
        raise ValueError(f"`temperatures` must be a non-empty list of temperatures, got {temperatures!r}.")
    best = None
    for t in temperatures:
        p_token = softmax(apply_temperature(logits, t))[token_id].item()
        if best is None or p_token >= best["probability"]:    # BUG: >= keeps the last T of a tie
            best = {"temperature": float(t), "probability": p_token}
    return best
