"""Keeps passing the cache returned by prefill and ignores the one decode returns:
every step forgets the tokens generated before it."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_cached_prefills_once": ["matches_uncached_on_toy"]}


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    logits, prompt_kv = decoder.prefill(input_ids)
    out = [int(logits[0, -1].argmax())]
    if on_token is not None:
        on_token(out[-1])
    while len(out) < max_new_tokens and out[-1] != eos_token_id:
        logits, _ = decoder.decode(torch.tensor([[out[-1]]]), prompt_kv)  # BUG: stale cache
        out.append(int(logits[0, -1].argmax()))
        if on_token is not None:
            on_token(out[-1])
    return out
