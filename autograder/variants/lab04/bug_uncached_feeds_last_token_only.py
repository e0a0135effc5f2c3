"""Feeds the model only the newest token each step, without any cache: the model
forgets the prompt, so after the first step the tokens are wrong."""
import torch

from autograder.reference.lab04 import (changed_positions, generate_cached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"generate_uncached_recomputes": ["toy_model_8_tokens", "feeds_whole_sequence_each_call",
                                                "tiny_model_greedy"]}


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    step_input = input_ids.clone()
    out = []
    for _ in range(max_new_tokens):
        token = int(model(step_input)[0, -1].argmax())
        out.append(token)
        if token == eos_token_id:
            break
        step_input = torch.tensor([[token]])  # BUG: the prefix is lost
    return out
