"""Correct, written as a rank threshold: count how many tokens each row's nucleus needs,
then keep the tokens whose stable rank is below that count. Sampling by the Gumbel-max
trick with noise from the generator. The pipeline uses a list of processors."""
import math
from functools import partial

import torch

EXPECT_FAIL = {}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _ranks(logits):
    """0 for the most likely token of each row; equal logits: the lower id ranks first."""
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    return torch.argsort(order, dim=-1)


def top_p_filter(logits, top_p, min_tokens_to_keep=1):
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or math.isnan(top_p) \
            or top_p <= 0 or top_p > 1:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}.")
    if not _is_int(min_tokens_to_keep) or min_tokens_to_keep < 1:
        raise ValueError(f"`min_tokens_to_keep` must be an integer >= 1, got {min_tokens_to_keep!r}.")
    if top_p == 1:
        return logits.clone()
    sorted_probs = torch.softmax(torch.sort(logits, dim=-1, descending=True).values, dim=-1)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs               # mass ahead of each rank
    count = (before < top_p).sum(dim=-1, keepdim=True).clamp(min=min_tokens_to_keep)  # (B, 1)
    return logits.masked_fill(_ranks(logits) >= count, -math.inf)


def top_k_filter(logits, top_k):
    if not _is_int(top_k) or top_k < 1:
        raise ValueError(f"`top_k` must be an integer >= 1, got {top_k!r}.")
    if top_k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.kthvalue(-logits, top_k, dim=-1, keepdim=True).values.neg()
    return logits.masked_fill(logits < kth, -math.inf)


def sample_token(logits, generator):
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator, got {generator!r}.")
    u = torch.rand(logits.shape, generator=generator).clamp_min(1e-12)
    gumbel = -torch.log(-torch.log(u))
    return torch.argmax(torch.log_softmax(logits, dim=-1) + gumbel, dim=-1)


def _temperature(logits, t):
    return logits / t


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    steps = [partial(_temperature, t=temperature)]
    if top_k is not None:
        steps.append(partial(top_k_filter, top_k=top_k))
    steps.append(partial(top_p_filter, top_p=top_p))
    out = logits
    for step in steps:
        out = step(out)
    return out
