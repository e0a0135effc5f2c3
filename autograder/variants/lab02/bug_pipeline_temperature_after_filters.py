"""Filters first and divides by T afterwards: temperature then no longer changes which
tokens reach top_p, only how the survivors share the mass."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"pipeline_matches_transformers": ["temperature_before_filters", "long_tail_t07_k5_p09"]}


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    out = logits
    if top_k is not None:
        out = top_k_filter(out, top_k)
    out = top_p_filter(out, top_p)
    return out / temperature                     # BUG: temperature comes first
