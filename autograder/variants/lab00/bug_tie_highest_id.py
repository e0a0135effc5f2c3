"""Takes the last maximum, so an exact tie goes to the highest id."""
import torch

EXPECT_FAIL = {"greedy_token_picks_argmax": ["exact_tie_goes_to_lowest_id"]}


def greedy_token(logits):
    if torch.isnan(logits).any():
        raise ValueError(f"`logits` must not contain NaN, got {logits.tolist()}")
    flipped = torch.flip(logits, dims=[0])
    return int(logits.numel() - 1 - torch.argmax(flipped))
