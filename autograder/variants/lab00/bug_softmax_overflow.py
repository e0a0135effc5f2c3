"""Takes the argmax of exp(logits): overflow turns several logits into inf (and the
shape is never checked)."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_picks_argmax": ["extreme_logits"]}


def greedy_token(logits):
    # BUG: no 1-D check
    if torch.isnan(logits).any():
        raise ValueError("`logits` contains NaN")
    return int(torch.argmax(torch.exp(logits) / torch.exp(logits).sum()))   # BUG: exp overflows to inf
