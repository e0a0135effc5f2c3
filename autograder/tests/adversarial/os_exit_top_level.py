"""A correct function, then os._exit() at the top level of the same cell: the cell kills
the child, is skipped on restart, so the function is missing."""
import os

import torch

EXPECT = {"max_score": 0, "problem": "stopped the grading process"}


def greedy_token(logits):
    if torch.isnan(logits).any():
        raise ValueError("`logits` must not contain NaN")
    return int(torch.nonzero(logits == logits.max())[0, 0])


os._exit(7)
