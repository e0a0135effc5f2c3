"""A correct engine written unlike the reference: the scheduler settles the decodes first on a
ledger (how many running requests keep their place is solved in one pass of prefix sums,
the rest are preempted together), then admits from a local count of free blocks; run_batch
isolates a failure with a helper per request; advance walks a table of endings and trims
the stream with string operations; abort looks the request up in a dict."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


def check_admission(engine, prompt_ids, params):
    vocab = engine.model.vocab_size
    ok = isinstance(prompt_ids, (list, tuple)) and len(prompt_ids) > 0
    bad = [t for t in (prompt_ids if ok else []) if type(t) is not int or not 0 <= t < vocab]
    if not ok or bad:
        raise ValueError(f"`prompt_ids` must be a non-empty list of ids below {vocab}; got {prompt_ids!r} "
                         f"(bad: {bad[:3]!r}).")
    params = RequestParams.coerce(params)
    cfg = engine.config
    span = len(prompt_ids) + params.max_tokens - 1
    limit = getattr(engine.model, "max_context", None)
    blocks = -(-span // cfg.block_size)
    if (limit is not None and span > limit) or blocks > cfg.num_blocks:
        raise RequestRefused(f"{span} tokens ({blocks} blocks) cannot run even alone "
                             f"(context {limit}, pool {cfg.num_blocks}).")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"the queue is full ({cfg.max_waiting} waiting).")
    return params


def _blocks(n_tokens, block_size):
    return -(-n_tokens // block_size)


def schedule(engine):
    bs, alloc, cfg = engine.config.block_size, engine.pool.allocator, engine.config
    run = engine.running
    needs = [r.blocks_to_feed(bs) for r in run]
    held = [len(r.cache.block_table) for r in run]
    # keep the longest prefix whose growth fits in what is free plus what the rest give back
    keep = len(run)
    while keep > 0 and sum(needs[:keep]) > alloc.num_free + sum(held[keep:]):
        keep -= 1
    victims = run[keep:]
    del run[keep:]
    now = engine.clock()
    for req in reversed(victims):              # the newest first, as a stack would give them up
        req.cache.release()
        req.cache = None
        req.preemptions += 1
        engine.preemptions += 1
        engine.stage(req, "queue", now)
    engine.waiting.extendleft(reversed(victims))   # the oldest victim ends up at the very front
    for req in run:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if victims:
        return list(run)
    free = alloc.num_free
    while engine.waiting and len(run) < cfg.max_batch:
        head = engine.waiting[0]
        cost = _blocks(len(head.ids), bs)
        reserve = cfg.watermark_blocks if run else 0
        if free - cost < reserve:
            break
        engine.waiting.popleft()
        head.cache = PagedKVCache(engine.pool)
        head.cache.reserve(len(head.ids))
        free -= cost
        run.append(head)
        engine.stage(head, "prefill", engine.clock())
    return run[:]


def _alone(engine, req):
    """req's logits from a forward of its own on a fresh reservation, or the exception it raises."""
    req.cache.release()
    req.cache.reserve(len(req.ids))
    try:
        return engine.model.forward_batch([req.ids], [req.cache])[0]
    except Exception as e:
        return e


def run_batch(engine, batch):
    try:
        out = engine.model.forward_batch([r.ids for r in batch], [r.cache for r in batch])
    except Exception as error:
        return [error] if len(batch) == 1 else [_alone(engine, r) for r in batch]
    return list(out.unbind(0))


def advance(engine, req, logits, now):
    if isinstance(logits, BaseException):
        return finish(engine, req, FinishReason.ERROR, now, error=f"{type(logits).__name__}: {logits}")
    try:
        if bool(torch.isnan(logits).any()):
            raise ValueError("NaN in the logits")
        token = engine.sample(req, logits)
    except Exception as e:
        return finish(engine, req, FinishReason.ERROR, now, error=f"{type(e).__name__}: {e}")
    req.tokens.append(token)
    engine.trace("token", req.id, at=now)
    engine.stage(req, "decode", now)
    p = req.params
    text = engine.text(req.tokens)
    before = engine.text(req.tokens[:-1])
    hit = first_stop(text, list(p.stop))
    endings = [
        (token == engine.eos_token_id and not p.ignore_eos, lambda: (before, None)),
        (token in p.stop_token_ids, lambda: (text if p.include_stop_str_in_output else before, token)),
        (hit is not None, lambda: (text[:hit[1]] if p.include_stop_str_in_output else text[:hit[0]], hit[2])),
    ]
    for matched, result in endings:
        if matched:
            full, why = result()
            return finish(engine, req, FinishReason.STOP, now, new=[token], text=full, stop_reason=why)
    if len(req.tokens) >= p.max_tokens:
        return finish(engine, req, FinishReason.LENGTH, now, new=[token], text=text)
    whole = len(text.rstrip("\ufffd"))         # half a character waits for the next token
    end = whole if p.include_stop_str_in_output else whole - holdback_length(text[:whole], list(p.stop))
    piece = text[req.sent:end] if end > req.sent else ""
    req.sent += len(piece)
    return RequestOutput(req.id, [token], piece, None, None, list(req.tokens), engine.usage(req))


def finish(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None):
    cache, req.cache = req.cache, None
    if cache is not None:
        cache.release()
    for queue in (engine.running, engine.waiting):
        if req in queue:
            queue.remove(req)
            break
    full = text if text is not None else engine.text(req.tokens)
    unsent, req.sent = full[req.sent:], len(full)
    key = str(reason)
    engine.finished_by_reason[key] = engine.finished_by_reason.get(key, 0) + 1
    usage = engine.usage(req)
    engine.finished[req.id] = RequestOutput(req.id, list(req.tokens), full, reason, stop_reason, list(req.tokens),
                                            usage, error)
    engine.trace("end_request", req.id, key, at=now)
    return RequestOutput(req.id, list(new), unsent, reason, stop_reason, list(req.tokens), usage, error)


def abort_request(engine, request_id):
    live = {r.id: r for r in (*engine.running, *engine.waiting)}
    if request_id in live:
        finish(engine, live[request_id], FinishReason.CANCELLED, engine.clock())
