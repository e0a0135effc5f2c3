"""Wraps transformers' TopPLogitsWarper: right on most inputs, but it sorts ascending (an
exact tie at the boundary keeps the HIGHER id), turns zero-probability tokens into -inf at
top_p = 1, and accepts top_p = 0 with a message that does not follow the course's template."""
from transformers import TopPLogitsWarper

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["ties_at_boundary_lowest_id_first", "min_tokens_to_keep",
                                              "p_equal_one_keeps_all", "invalid_parameters_rejected"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    warper = TopPLogitsWarper(top_p, min_tokens_to_keep=min_tokens_to_keep)   # BUG: not the contract
    if logits.dim() == 1:
        return warper(None, logits[None])[0]
    return warper(None, logits)
