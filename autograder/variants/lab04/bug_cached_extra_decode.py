"""Runs decode on every token it emits, including the last one: one wasted decode
step per request (its logits are never used). The tokens are right."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_cached_prefills_once": ["one_prefill_then_single_token_decodes",
                                                 "no_decode_after_last_token", "stops_at_eos"]}


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    logits, kv = decoder.prefill(input_ids)
    out = []
    for _ in range(max_new_tokens):
        token = int(logits[0, -1].argmax())
        out.append(token)
        if on_token is not None:
            on_token(token)
        logits, kv = decoder.decode(torch.tensor([[token]]), kv)  # BUG: also after the last token
        if token == eos_token_id:
            break
    return out
