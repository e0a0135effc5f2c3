"""Takes the stop-string holdback of the raw text while it still ends with half a character,
and only then steps back over the "\\ufffd": the holdback of "Hello\\ufffd" for stop
"o\\u4e2d!" is 0, so the "o" that may begin the stop string is streamed. When the stop string
comes, the final text ("Hell") is shorter than the deltas joined ("Hello")."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"every_ending_frees_its_blocks": ["stop_string_before_a_half_character_is_held"]}


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
    held = 0 if p.include_stop_str_in_output else holdback_length(raw, list(p.stop))   # BUG: "\ufffd" and all
    safe = len(raw) - held
    while safe > req.sent and raw[safe - 1] == "\ufffd":   # BUG: the step back comes after the holdback
        safe -= 1
    delta = raw[req.sent:safe] if safe > req.sent else ""
    req.sent = max(req.sent, safe)
    return RequestOutput(req.id, [token], delta, None, None, list(req.tokens), engine.usage(req))
