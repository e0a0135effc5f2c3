"""Reference for lab00 (orientation): pick the greedy token."""
import torch


def greedy_token(logits: torch.Tensor) -> int:
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        raise ValueError("`logits` must be a 1-D tensor")  # pragma: no mutate
    if torch.isnan(logits).any():
        raise ValueError("`logits` must not contain NaN")  # pragma: no mutate
    best = logits.max()
    return int(torch.nonzero(logits == best)[0, 0])  # lowest id among the maxima
