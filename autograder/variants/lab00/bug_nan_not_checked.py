"""Never checks for NaN (nor the shape): torch.argmax then returns the NaN's index."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_picks_argmax": ["nan_rejected"]}


def greedy_token(logits):
    return int(torch.argmax(logits))   # BUG: no NaN check, no 1-D check
