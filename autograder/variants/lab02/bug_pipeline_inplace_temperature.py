"""Divides by T in place (`logits /= T`): the caller's logits change under its feet."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"pipeline_matches_transformers": ["input_not_modified"]}


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    if top_k is not None:
        top_k_filter(logits[..., :1], top_k)  # validates top_k
    top_p_filter(logits[..., :1], top_p)      # validates top_p
    logits /= temperature                     # BUG: in place
    out = logits
    if top_k is not None:
        out = top_k_filter(out, top_k)
    return top_p_filter(out, top_p)
