"""Sorts without stable=True: equal probabilities come out in whatever order torch's sort
leaves them (on a wide row of ties, not lowest id first), so a cut-off inside a tie keeps
the wrong tokens."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"top_p_keeps_crossing_token": ["ties_at_boundary_lowest_id_first"]}


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) \
            or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)   # BUG: not stable
    sorted_probs = torch.softmax(sorted_logits, dim=-1)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    mass_before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
    remove_sorted = mass_before >= top_p
    remove_sorted[..., :min_tokens_to_keep] = False
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))
