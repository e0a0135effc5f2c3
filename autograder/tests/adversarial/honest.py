"""Not an attack: a correct solution graded in the same batch as every attack, by the same
workers. It must keep its full marks whatever ran before it (daemons, crashes, kills)."""
import torch

EXPECT = {"max_score": 99, "full_marks": True}


def greedy_token(logits):
    if logits.dim() != 1:
        raise ValueError(f"`logits` must be 1-D, got shape {tuple(logits.shape)}")
    if torch.isnan(logits).any():
        raise ValueError("`logits` must not contain NaN")
    return int(torch.nonzero(logits == logits.max())[0, 0])
