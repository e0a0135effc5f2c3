"""Counts the generated tokens with `<=`: one token more than max_new_tokens, and one
model call more."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_uncached_recomputes": ["toy_model_8_tokens", "feeds_whole_sequence_each_call",
                                                "one_new_token", "tiny_model_greedy"]}


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    ids = input_ids.clone()
    prompt_len = ids.shape[1]
    while ids.shape[1] - prompt_len <= max_new_tokens:  # BUG: should be <
        token = int(model(ids)[0, -1].argmax())
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        if token == eos_token_id:
            break
    return ids[0, prompt_len:].tolist()
