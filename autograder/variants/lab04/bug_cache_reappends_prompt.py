"""A "cached" loop that prefills the whole sequence again at every step. The tokens
are right, but the cost is the uncached loop's: every step re-feeds the prompt."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_cached_prefills_once": ["one_prefill_then_single_token_decodes", "stops_at_eos",
                                                 "streams_each_token_before_next_step"]}


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    ids = input_ids.clone()
    out = []
    for _ in range(max_new_tokens):
        logits, kv = decoder.prefill(ids)  # BUG: the whole sequence again, the cache thrown away
        token = int(logits[0, -1].argmax())
        out.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out
