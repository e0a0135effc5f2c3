"""Validates the prompt and max_new_tokens but not eos_token_id: -1 (never generated)
and True (== 1, a real token id) are used as given."""
import torch

from autograder.reference.lab04 import changed_positions, latency_metrics, serve_request  # noqa: F401

EXPECT_FAIL = {"generate_uncached_recomputes": ["rejects_bad_prompt_and_eos"],
               "generate_cached_prefills_once": ["rejects_bad_prompt_and_eos"]}


def _check(input_ids, max_new_tokens):
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1 \
            or input_ids.shape[1] < 1 or input_ids.dtype != torch.long:
        raise ValueError(f"`input_ids` must be a (1, T) long tensor, got {input_ids!r}.")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    # BUG: eos_token_id is never checked


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    _check(input_ids, max_new_tokens)
    ids, out = input_ids.clone(), []
    while len(out) < max_new_tokens:
        token = int(torch.argmax(model(ids)[0, -1]))
        out.append(token)
        if token == eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    _check(input_ids, max_new_tokens)
    logits, kv = decoder.prefill(input_ids)
    out = []
    while True:
        token = int(torch.argmax(logits[0, -1]))
        out.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_token_id or len(out) == max_new_tokens:
            return out
        logits, kv = decoder.decode(torch.tensor([[token]]), kv)
