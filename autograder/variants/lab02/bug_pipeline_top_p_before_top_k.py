"""Runs top-p before top-k: top-p then sees the full distribution instead of the k
survivors, so it keeps more tokens than transformers does."""
import math

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"pipeline_matches_transformers": ["top_k_before_top_p"]}


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    out = logits / temperature
    out = top_p_filter(out, top_p)               # BUG: the order is temperature -> top-k -> top-p
    if top_k is not None:
        out = top_k_filter(out, top_k)
    return out
