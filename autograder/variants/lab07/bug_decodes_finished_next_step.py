"""finish leaves an ended request in `running` with its blocks; the next step feeds it to the
model once more and only then drops it and frees its blocks."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'every_ending_frees_its_blocks': ['blocks_released_in_the_finishing_step', 'no_forward_after_finishing']}


def advance(engine, req, logits, now):
    if getattr(req, "done", False):
        req.cache.release()
        engine.running.remove(req)
        return RequestOutput(req.id, [], "", None, None, list(req.tokens), engine.usage(req))
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
    end = len(raw)
    while end > req.sent and raw[end - 1] == "\ufffd":
        end -= 1
    held = 0 if p.include_stop_str_in_output else holdback_length(raw[:end], list(p.stop))
    safe = end - held
    delta = raw[req.sent:safe] if safe > req.sent else ""
    req.sent = max(req.sent, safe)
    return RequestOutput(req.id, [token], delta, None, None, list(req.tokens), engine.usage(req))


def finish(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None):
    if req in engine.running:
        req.done = True        # BUG: cleaned up after the next forward
    elif req in engine.waiting:
        engine.waiting.remove(req)
    full = engine.text(req.tokens) if text is None else text
    delta = full[req.sent:]
    req.sent = len(full)
    engine.finished_by_reason[str(reason)] += 1
    engine.finished[req.id] = RequestOutput(req.id, list(req.tokens), full, reason, stop_reason,
                                            list(req.tokens), engine.usage(req), error)
    engine.trace("end_request", req.id, str(reason), at=now)
    return RequestOutput(req.id, list(new), delta, reason, stop_reason, list(req.tokens), engine.usage(req), error)
