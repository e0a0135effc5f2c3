"""Takes the argmax of exp(logits): overflow turns several logits into inf."""
import torch

EXPECT_FAIL = {"greedy_token_picks_argmax": ["extreme_logits"]}


def greedy_token(logits):
    if torch.isnan(logits).any():
        raise ValueError("`logits` contains NaN")
    probs = torch.exp(logits) / torch.exp(logits).sum()
    return int(torch.argmax(probs))
