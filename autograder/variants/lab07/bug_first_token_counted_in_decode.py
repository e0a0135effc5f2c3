"""advance opens the `decode` stage before it records the token: the spans' times, stages and
metrics are all unchanged, but the first token is counted in the decode span instead of the
prefill that chose it (tokens per segment: prefill 0, decode all)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'spans_and_metrics_through_the_tracer': ['tokens_per_segment']}


def advance(engine, req, logits, now):
    if isinstance(logits, Exception):
        return finish(engine, req, FinishReason.ERROR, now, error=f"{type(logits).__name__}: {logits}")
    try:
        if torch.isnan(logits).any():
            raise ValueError(f"the model returned NaN logits at step {len(req.tokens)}")
        token = engine.sample(req, logits)
    except Exception as e:
        return finish(engine, req, FinishReason.ERROR, now, error=f"{type(e).__name__}: {e}")
    req.tokens.append(token)
    engine.stage(req, "decode", now)         # BUG: decode opens before the token is recorded: the prefill's
    engine.trace("token", req.id, at=now)    # span counts no token, the first one lands in decode
    p = req.params
    if token == engine.eos_token_id and not p.ignore_eos:
        return finish(engine, req, FinishReason.STOP, now, new=[token], text=engine.text(req.tokens[:-1]))
    if token in p.stop_token_ids:
        keep = req.tokens if p.include_stop_str_in_output else req.tokens[:-1]
        return finish(engine, req, FinishReason.STOP, now, new=[token], text=engine.text(keep), stop_reason=token)
    raw = engine.text(req.tokens)
    match = first_stop(raw, list(p.stop))
    if match is not None:
        i, j, s = match
        return finish(engine, req, FinishReason.STOP, now, new=[token],
                      text=raw[:j] if p.include_stop_str_in_output else raw[:i], stop_reason=s)
    if len(req.tokens) == p.max_tokens:
        return finish(engine, req, FinishReason.LENGTH, now, new=[token], text=raw)
    end = len(raw)
    while end > req.sent and raw[end - 1] == "\ufffd":
        end -= 1
    held = 0 if p.include_stop_str_in_output else holdback_length(raw[:end], list(p.stop))
    safe = end - held
    delta = raw[req.sent:safe] if safe > req.sent else ""
    req.sent = max(req.sent, safe)
    return RequestOutput(req.id, [token], delta, None, None, list(req.tokens), engine.usage(req))
