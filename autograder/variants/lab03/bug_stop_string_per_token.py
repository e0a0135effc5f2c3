"""Looks for stop strings only inside the newest token: '###' arriving as '#' + '##'
(or '\nUser:' as three tokens) is never seen, and the model writes on past it."""
import torch

import course
from course import FinishReason
from course.runs import GenerationResult, greedy_sampler

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'generate_stops_and_lengths': ['stop_string_split_across_two_tokens', 'stop_string_split_across_three_tokens', 'overlapping_stop_prefix']}


def generate(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False,
             sampler=None, cancel=None, clock=None, deadline=None, content_filter=None):
    p = validate_params(max_tokens=max_tokens, stop=stop, stop_token_ids=stop_token_ids,
                        include_stop_str_in_output=include_stop_str_in_output, deadline=deadline)
    sampler = sampler or greedy_sampler
    clock = clock or course.monotonic
    t0 = clock()
    ids, tokens, raw = input_ids, [], ""

    def result(reason, text, stop_reason=None, error=None):
        return GenerationResult(tokens=list(tokens), text=text, finish_reason=reason, stop_reason=stop_reason,
                                usage={"input_tokens": input_ids.shape[1], "output_tokens": len(tokens)},
                                raw_output=raw, error=error)

    while True:
        if cancel is not None and cancel.is_set():
            return result(FinishReason.CANCELLED, raw)
        if p["deadline"] is not None and clock() - t0 >= p["deadline"]:
            return result(FinishReason.TIMEOUT, raw)
        try:
            logits = model(ids)[0]  # (V,)
            if torch.isnan(logits).any():
                raise ValueError("NaN logits")
            token = int(sampler(logits))
        except Exception as e:
            return result(FinishReason.ERROR, raw, error=f"{type(e).__name__}: {e}")
        piece = model.decode([token])
        before, raw = raw, raw + piece
        tokens.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        if content_filter is not None and content_filter(token, raw):
            return result(FinishReason.CONTENT_FILTER, before)
        if token == model.eos_token_id:
            return result(FinishReason.STOP, before)
        if token in p["stop_token_ids"]:
            return result(FinishReason.STOP, raw if p["include_stop_str_in_output"] else before, token)
        hits = [s for s in p["stop"] if s in piece]   # BUG: only the new token's text is searched
        if hits:
            cut = len(before) + piece.find(hits[0])
            keep = raw[:cut + len(hits[0])] if p["include_stop_str_in_output"] else raw[:cut]
            return result(FinishReason.STOP, keep, hits[0])
        if len(tokens) == p["max_tokens"]:
            return result(FinishReason.LENGTH, raw)
