"""Treats T == 0 like any other temperature and divides: x / 0 is +inf, -inf, or NaN
(for a logit of exactly 0), instead of keeping only the argmax."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"temperature_zero_is_greedy": ["zero_keeps_only_argmax", "zero_tie_keeps_lowest_id",
                                              "integer_zero", "zero_on_batch_2_3_v",
                                              "zero_with_extreme_logits", "tiny_t_agrees_with_zero"]}

_apply_temperature = apply_temperature   # the solution's, kept before it is replaced


def apply_temperature(logits, temperature):
    _apply_temperature(logits, temperature)                    # its checks
    return logits / temperature                                # BUG: T == 0 divides too


def best_temperature_for_token(logits, token_id, temperatures):   # the solution's, on the solution's apply_temperature
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        raise ValueError(f"`logits` must be a 1-D tensor (V,), got {type(logits).__name__}.")
    n_tokens = logits.shape[0]
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < n_tokens:
        raise ValueError(f"`token_id` must be an integer in [0, {n_tokens - 1}], got {token_id!r}.")
    if not isinstance(temperatures, (list, tuple)) or len(temperatures) == 0:
        raise ValueError(f"`temperatures` must be a non-empty list of temperatures, got {temperatures!r}.")
    best = None
    for t in temperatures:
        p_token = softmax(_apply_temperature(logits, t))[token_id].item()
        if best is None or p_token > best["probability"]:
            best = {"temperature": float(t), "probability": p_token}
    return best
