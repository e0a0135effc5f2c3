"""Entropy as -sum(p * log p) with no care for p == 0: 0 * log(0) = 0 * -inf = NaN.
(Nor does it check the type and shape of `probs`.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"entropy_in_nats": ["one_hot_is_zero", "zeros_from_masked_tokens", "batch_shape_2_3"]}


def entropy(probs):
    # BUG: no check that probs is a floating-point tensor with a dimension
    if (probs < 0).any() or torch.isnan(probs).any() or ((probs.sum(-1) - 1).abs() > 1e-4).any():
        raise ValueError("`probs` must be probabilities")
    return -(probs * torch.log(probs)).sum(dim=-1)   # BUG: 0 * log(0) is NaN
