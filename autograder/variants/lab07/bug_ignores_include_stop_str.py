"""include_stop_str_in_output is ignored at the ending: the final text drops the stop token's
text and the stop string even when the request asked to keep them."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'every_ending_frees_its_blocks': ['stop_kept_with_include_stop_str_in_output']}


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
    engine.trace("token", req.id, at=now)
    engine.stage(req, "decode", now)
    p = req.params
    if token == engine.eos_token_id and not p.ignore_eos:
        return finish(engine, req, FinishReason.STOP, now, new=[token], text=engine.text(req.tokens[:-1]))
    if token in p.stop_token_ids:
        keep = req.tokens[:-1]                      # BUG: include_stop_str_in_output ignored
        return finish(engine, req, FinishReason.STOP, now, new=[token], text=engine.text(keep), stop_reason=token)
    raw = engine.text(req.tokens)
    match = first_stop(raw, list(p.stop))
    if match is not None:
        i, j, s = match
        return finish(engine, req, FinishReason.STOP, now, new=[token],
                      text=raw[:i], stop_reason=s)    # BUG: include_stop_str_in_output ignored
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
