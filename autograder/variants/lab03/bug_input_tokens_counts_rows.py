"""Counts the prompt with len(input_ids), which is the number of rows of the (1, T0) tensor:
usage reports 1 input token whatever the prompt's length."""
import torch

import course
from course import FinishReason
from course.runs import GenerationResult, greedy_sampler

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"generate_stops_and_lengths": ["a_longer_prompt_counts_in_usage"]}


def generate(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False,
             sampler=None, cancel=None, clock=None, deadline=None, content_filter=None):
    p = validate_params(max_tokens=max_tokens, stop=stop, stop_token_ids=stop_token_ids,
                        include_stop_str_in_output=include_stop_str_in_output, deadline=deadline)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"`input_ids` must be a (1, T) tensor of token ids, got {shape}.")
    pick = sampler or greedy_sampler
    now = clock or course.monotonic
    started = now()
    eos = getattr(model, "eos_token_id", None)
    ids, tokens, raw = input_ids, [], ""

    def finish(reason, text, stop_reason=None, error=None):
        return GenerationResult(tokens=tokens, text=text, finish_reason=reason, stop_reason=stop_reason,
                                usage={"input_tokens": len(input_ids),   # BUG: the rows (1), not the prompt's tokens
                                       "output_tokens": len(tokens)},
                                raw_output=raw, error=error)

    while True:
        if cancel is not None and cancel.is_set():
            return finish(FinishReason.CANCELLED, raw)
        if p["deadline"] is not None and now() - started >= p["deadline"]:
            return finish(FinishReason.TIMEOUT, raw)
        try:
            next_logits = model(ids)[0]                         # (V,)
            if torch.isnan(next_logits).any():
                raise FloatingPointError(f"NaN logits at step {len(tokens)}")
            token = int(pick(next_logits))
        except Exception as e:
            return finish(FinishReason.ERROR, raw, error=f"{type(e).__name__}: {e}")
        shown_before = raw
        tokens.append(token)
        raw = raw + model.decode([token])
        ids = torch.cat([ids, torch.tensor([[token]], dtype=ids.dtype)], dim=1)   # (1, T + 1)
        if content_filter is not None and content_filter(token, raw):
            return finish(FinishReason.CONTENT_FILTER, shown_before)
        if token == eos:
            return finish(FinishReason.STOP, shown_before)
        if token in p["stop_token_ids"]:
            keep = raw if p["include_stop_str_in_output"] else shown_before
            return finish(FinishReason.STOP, keep, stop_reason=token)
        hit = first_stop(raw, p["stop"])
        if hit is not None:
            begin, end, matched = hit
            keep = raw[:end] if p["include_stop_str_in_output"] else raw[:begin]
            return finish(FinishReason.STOP, keep, stop_reason=matched)
        if len(tokens) == p["max_tokens"]:
            return finish(FinishReason.LENGTH, raw)
