"""Compares the deadline with the clock's absolute reading instead of the time since
generate started: right only for a clock that starts at 0."""
import torch

import course
from course import FinishReason
from course.runs import GenerationResult, greedy_sampler

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'generate_abnormal_endings': ['deadline_hit_mid_way', 'deadline_reached_exactly', 'deadline_not_reached',
                                              'cancel_wins_over_timeout']}


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
        if p["deadline"] is not None and clock() >= p["deadline"]:  # BUG: absolute time, not time since t0
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
        m = first_stop(raw, p["stop"])
        if m is not None:
            return result(FinishReason.STOP, raw[:m[1]] if p["include_stop_str_in_output"] else raw[:m[0]], m[2])
        if len(tokens) == p["max_tokens"]:
            return result(FinishReason.LENGTH, raw)
