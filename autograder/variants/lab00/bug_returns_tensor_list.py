"""Returns a one-element list instead of an int (and never checks the shape)."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_picks_argmax": ["peaked_distribution", "exact_tie_goes_to_lowest_id"]}


def greedy_token(logits):
    # BUG: no 1-D check
    if torch.isnan(logits).any():
        raise ValueError("`logits` contains NaN")
    return [int(torch.argmax(logits))]   # BUG: a list, not an int
