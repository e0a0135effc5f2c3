"""Correct, written the transformers way round: sort ASCENDING and remove the tokens whose
running sum stays <= 1 - top_p. Flipping the vocabulary first makes the ascending stable
sort put the LOWER id last among equal probabilities, so it is kept first, as the contract
says. Sampling by inverse CDF: one uniform per row from the generator, then searchsorted."""
import math
import numbers

import torch

EXPECT_FAIL = {}


def _check_p(top_p, min_tokens_to_keep):
    if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not (0 < top_p <= 1):
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    _check_p(top_p, min_tokens_to_keep)
    if top_p == 1:
        return logits.clone()
    flipped = logits.flip(-1)                                       # id j -> position V-1-j
    asc, order = torch.sort(flipped, dim=-1, stable=True)           # least likely first
    cum = torch.softmax(asc, dim=-1).cumsum(dim=-1)
    remove = cum <= 1 - top_p
    remove[..., -min_tokens_to_keep:] = False                       # the most likely survive
    remove_flipped = torch.zeros_like(remove).scatter(-1, order, remove)
    return logits.masked_fill(remove_flipped.flip(-1), -math.inf)


def top_k_filter(logits, top_k):
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    values = torch.sort(logits, dim=-1, descending=True).values
    kth = values[..., min(top_k, logits.shape[-1]) - 1].unsqueeze(-1)
    return torch.where(logits >= kth, logits, torch.full_like(logits, -math.inf))


def sample_token(logits, generator):
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator, got {type(generator).__name__}.")
    probs = torch.softmax(logits.double(), dim=-1)                  # (B, V)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
    idx = torch.searchsorted(cdf, u, right=True)[:, 0]              # first token whose cdf exceeds u
    last_possible = (probs > 0).long().cumsum(-1).argmax(-1)        # guard u rounding onto the end
    return torch.minimum(idx, last_possible)


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"`top_k` must be None or an integer >= 1, got {top_k!r}.")
    _check_p(top_p, 1)
    out = logits / temperature
    if top_k is not None:
        out = top_k_filter(out, top_k)
    return top_p_filter(out, top_p)
