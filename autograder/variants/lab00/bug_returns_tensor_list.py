"""Returns a one-element list instead of an int."""
import torch

EXPECT_FAIL = {"greedy_token_picks_argmax": ["peaked_distribution", "exact_tie_goes_to_lowest_id"]}


def greedy_token(logits):
    if torch.isnan(logits).any():
        raise ValueError("`logits` contains NaN")
    return [int(torch.argmax(logits))]
