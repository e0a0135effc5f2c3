"""Divides in place (logits.div_(T)): the caller's logits change, and the result is the
input tensor itself."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"temperature_scales_logits": ["divides_logits_by_t", "low_t_sharpens", "integer_temperature",
                                             "batch_shape_2_3_v", "masked_stay_masked", "t_one_returns_a_copy"]}

_apply_temperature = apply_temperature   # the solution's, kept before it is replaced


def apply_temperature(logits, temperature):
    if temperature == 0:
        return _apply_temperature(logits, temperature)
    _apply_temperature(logits, temperature)                    # its checks
    return logits.div_(temperature)                            # BUG: in place


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
