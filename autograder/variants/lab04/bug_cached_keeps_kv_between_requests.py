"""Keeps the last request's kv on the decoder object to 'save a prefill': the first
request is right, a second request on the same decoder continues the old one."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_cached_prefills_once": ["matches_uncached_on_toy"]}


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    state = getattr(decoder, "_saved", None)
    if state is None:
        logits, kv = decoder.prefill(input_ids)
    else:  # BUG: reuses the previous request's cache and logits
        logits, kv = state
    out = []
    while True:
        token = int(torch.argmax(logits[0, -1]))
        out.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_token_id or len(out) == max_new_tokens:
            decoder._saved = decoder.decode(torch.tensor([[token]]), kv)
            return out
        logits, kv = decoder.decode(torch.tensor([[token]]), kv)
