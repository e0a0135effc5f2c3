"""Never checks the shape: torch.argmax of a (2, V) batch is an index into the flattened
batch, and some id comes back instead of a ValueError."""
import torch

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_picks_argmax": ["non_1d_rejected"]}


def greedy_token(logits):
    # BUG: no 1-D check
    if torch.isnan(logits).any():
        raise ValueError("`logits` must not contain NaN.")
    return int(torch.argmax(logits))
