"""Takes the last maximum, so an exact tie goes to the highest id (and the shape is
never checked)."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_picks_argmax": ["exact_tie_goes_to_lowest_id"]}


def greedy_token(logits):
    # BUG: no 1-D check
    if torch.isnan(logits).any():
        raise ValueError(f"`logits` must not contain NaN, got {logits.tolist()}")
    return int(logits.numel() - 1 - torch.argmax(torch.flip(logits, dims=[0])))   # BUG: the last maximum
