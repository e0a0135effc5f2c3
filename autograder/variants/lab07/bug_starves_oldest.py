"""Admission skips a waiting request that does not fit and admits smaller ones behind it, so a
big request can wait for as long as small ones keep arriving."""
from collections import deque

import torch

from course.batched import (EngineConfig, QueueFull, RequestOutput, RequestParams, RequestRefused,
                            ScriptedBatchedModel, SimulatedCost, as_batched)
from course.clock import FakeClock, monotonic
from course.finish import FinishReason
from course.generation import first_stop, holdback_length
from course.paged_kv import PagedKVCache, blocks_needed
from course.sampling import sample_next


EXPECT_FAIL = {'scheduling_is_fcfs_and_preempts_the_newest': ['fcfs_head_is_not_skipped', 'no_request_waits_forever']}


class Request:
    """The engine's record of one request."""

    def __init__(self, request_id, prompt, params, arrival):
        self.id, self.prompt, self.params, self.arrival = request_id, prompt, params, arrival
        self.tokens = []          # generated so far (kept across preemption)
        self.cache = None         # a PagedKVCache while it runs, None while it waits
        self.generator = None     # its own torch.Generator when it samples
        self.sent = 0             # characters of text already streamed
        self.stage = "queue"      # the tracer's open stage span
        self.preemptions = 0

    @property
    def ids(self):
        """Everything the model must have seen: prompt + generated tokens."""
        return self.prompt + self.tokens

    def blocks_to_feed(self, block_size):
        """Blocks this request still needs so that its cache can hold all of `ids`."""
        held = len(self.cache.block_table) if self.cache is not None else 0
        return max(0, blocks_needed(len(self.ids), block_size) - held)

    def __repr__(self):
        return f"Request({self.id!r}, tokens={len(self.tokens)}, cache={self.cache})"


class Engine:
    """Continuous batching over one paged KV pool: add_request, step, abort, has_unfinished."""

    def __init__(self, model, tokenizer=None, config=None, clock=monotonic, tracer=None):
        self.model = as_batched(model)             # forward_batch(token_ids, caches) -> (B, V) logits
        self.config = config if config is not None else EngineConfig()
        self.clock, self.tracer = clock, tracer
        text_source = tokenizer if tokenizer is not None else self.model
        self.decode = getattr(text_source, "decode", None)
        self.eos_token_id = getattr(text_source, "eos_token_id", None)
        self.pool = self.model.new_pool(self.config.num_blocks, self.config.block_size)
        self.waiting = deque()                     # oldest first; preempted requests go back in front
        self.running = []                          # in admission order: the newest is last
        self.finished = {}                         # request id -> its final RequestOutput
        self.preemptions = 0
        self.finished_by_reason = {str(r): 0 for r in FinishReason}
        self._count = 0

    # ---- the API
    def add_request(self, prompt_ids, params=None, request_id=None):
        params = check_admission(self, prompt_ids, params)        # Exercise 1
        self._count += 1
        request_id = request_id or f"req-{self._count}"
        now = self.clock()
        self.waiting.append(Request(request_id, list(prompt_ids), params, now))
        self.trace("start_request", request_id, arrival_time=now,              # opens the "queue" span
                   attributes={"gen_ai.request.max_tokens": params.max_tokens,
                               "gen_ai.usage.input_tokens": len(prompt_ids)})
        return request_id

    def step(self):
        now = self.clock()
        outputs = [finish(self, r, FinishReason.TIMEOUT, now)                 # Exercise 5
                   for r in list(self.running) + list(self.waiting)
                   if r.params.deadline is not None and now - r.arrival >= r.params.deadline]
        batch = schedule(self)                                                # Exercise 2
        if batch:
            rows = run_batch(self, batch)                                     # Exercise 3
            done_at = self.clock()                                            # after the forward
            outputs += [advance(self, r, row, done_at) for r, row in zip(batch, rows)]   # Exercise 4
        self.trace("counter", "batch_size", len(batch), at=self.clock())
        self.trace("counter", "kv_blocks_in_use", self.pool.allocator.num_used, at=self.clock())
        return outputs

    def abort(self, request_id):
        abort_request(self, request_id)                                       # Exercise 6

    def has_unfinished(self):
        return bool(self.running or self.waiting)

    def stats(self):
        a = self.pool.allocator
        return {"running": len(self.running), "waiting": len(self.waiting), "kv_blocks_used": a.num_used,
                "kv_blocks_total": a.num_blocks, "preemptions": self.preemptions,
                "finished_by_reason": dict(self.finished_by_reason)}

    # ---- helpers for the exercises
    def text(self, tokens):
        """The text of `tokens` ("" without a tokenizer)."""
        return self.decode(list(tokens)) if self.decode is not None and tokens else ""

    def sample(self, req, logits):
        """The next token from logits (V,): argmax at temperature 0, else a draw from the
        request's own generator (seeded once from params.seed)."""
        params = req.params
        if params.temperature == 0:
            return int(torch.argmax(logits))
        if req.generator is None:
            seed = params.seed if params.seed is not None else int(torch.randint(2 ** 62, ()))
            req.generator = torch.Generator(device=logits.device).manual_seed(seed)
        return int(sample_next(logits.float(), temperature=params.temperature, top_k=params.top_k,
                               top_p=params.top_p, generator=req.generator))

    def usage(self, req):
        return {"prompt_tokens": len(req.prompt), "completion_tokens": len(req.tokens)}

    def stage(self, req, stage, at):
        """Open span `stage` ("queue", "prefill", "decode") for req, unless it is open already."""
        if req.stage != stage:
            req.stage = stage
            self.trace("start_stage", req.id, stage, at=at)

    def trace(self, method, *args, **kwargs):
        """tracer.method(*args, **kwargs), or nothing without a tracer."""
        if self.tracer is not None:
            getattr(self.tracer, method)(*args, **kwargs)


def check_admission(engine, prompt_ids, params):
    """Check a new request before it is queued; return its RequestParams.

    prompt_ids: must be a non-empty list of int token ids in [0, engine.model.vocab_size),
        else ValueError naming `prompt_ids` and showing the bad value.
    params: anything RequestParams.coerce accepts (None, a dict, a RequestParams).
    Raises RequestRefused when the request could not run even alone in an empty pool:
    prompt + max_tokens - 1 tokens (the last token is returned, never fed back) are more
    than the model's context (engine.model.max_context, when it has one) or need more
    than num_blocks blocks. The watermark plays no part: every other request is accepted,
    and schedule() must then finish it.
    Raises QueueFull when len(engine.waiting) >= engine.config.max_waiting.
    """
    vocab = engine.model.vocab_size
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids or not all(
            type(t) is int and 0 <= t < vocab for t in prompt_ids):
        raise ValueError(f"`prompt_ids` must be a non-empty list of token ids in [0, {vocab}), got {prompt_ids!r}.")
    params = RequestParams.coerce(params)
    cfg = engine.config
    longest = len(prompt_ids) + params.max_tokens - 1
    context = getattr(engine.model, "max_context", None)
    if context is not None and longest > context:
        raise RequestRefused(f"{longest} tokens exceed the model's context of {context}.")
    if blocks_needed(longest, cfg.block_size) > cfg.num_blocks:       # could not run even alone
        raise RequestRefused(f"{longest} tokens need {blocks_needed(longest, cfg.block_size)} blocks of "
                             f"{cfg.block_size}; the pool has {cfg.num_blocks}.")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"{len(engine.waiting)} requests are waiting (max_waiting={cfg.max_waiting}).")
    return params


def schedule(engine):
    """Decide who runs in this step's forward pass; return them as a NEW list (a copy of
    engine.running: finish() removes requests from engine.running during the step).

    1. Blocks for the running: while the running requests together need more new blocks
       (sum of req.blocks_to_feed(block_size)) than the pool has free
       (engine.pool.allocator.num_free), PREEMPT THE NEWEST running request (the last of
       engine.running): release its cache, set req.cache = None, keep req.tokens, count
       it in engine.preemptions and req.preemptions, put it at the FRONT of
       engine.waiting, and open its "queue" stage (engine.stage(req, "queue", clock())).
       Then reserve every running request's blocks: req.cache.reserve(len(req.ids) -
       req.cache.length).
    2. Admission, only in a step that preempted nobody: while engine.waiting is not empty
       and len(engine.running) < max_batch, look at the OLDEST waiting request (the head).
       Keep watermark_blocks free while any request is running, none while none is: if
       num_free - blocks_needed(len(head.ids), block_size) is less than that, stop; never
       skip the head for a smaller request behind it. Otherwise move it to the end
       of engine.running with a new PagedKVCache(engine.pool) that has reserved
       len(head.ids) tokens, and open its "prefill" stage.
    """
    bs, alloc = engine.config.block_size, engine.pool.allocator
    preempted = False
    while engine.running and sum(r.blocks_to_feed(bs) for r in engine.running) > alloc.num_free:
        victim = engine.running.pop()
        victim.cache.release()
        victim.cache = None
        victim.preemptions += 1
        engine.preemptions += 1
        engine.waiting.appendleft(victim)
        engine.stage(victim, "queue", engine.clock())
        preempted = True
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if not preempted:
        for head in list(engine.waiting):
            if len(engine.running) >= engine.config.max_batch:
                break
            keep = engine.config.watermark_blocks if engine.running else 0
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                continue       # BUG: skips the oldest for whoever fits
            engine.waiting.remove(head)
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)


def run_batch(engine, batch):
    """One forward pass for the whole batch; return one item per request, in order: its
    next-token logits (V,), or the exception that request causes.

    Call engine.model.forward_batch([r.ids for r in batch], [r.cache for r in batch]) ONCE.
    If it raises and the batch holds one request, that exception is its item. If it
    raises for a larger batch, find who caused it: for each request, release its cache
    (the failed call may have written part of it), reserve len(req.ids) tokens again and
    run it alone; its item is its logits, or the exception it raised alone. So one
    broken request never ends the others.
    """
    try:
        logits = engine.model.forward_batch([r.ids for r in batch], [r.cache for r in batch])
        return [logits[i] for i in range(len(batch))]
    except Exception as error:
        if len(batch) == 1:
            return [error]
    items = []
    for req in batch:
        req.cache.release()
        req.cache.reserve(len(req.ids))
        try:
            items.append(engine.model.forward_batch([req.ids], [req.cache])[0])
        except Exception as e:
            items.append(e)
    return items


def advance(engine, req, logits, now):
    """Turn one request's item from run_batch into its token and its RequestOutput.

    logits: its (V,) row, or an exception -> finish(..., ERROR, error="Type: message").
    NaN anywhere in the row, or engine.sample raising -> ERROR as well (no token kept).
    Otherwise token = engine.sample(req, logits); append it to req.tokens; record it on
    the tracer (engine.trace("token", req.id, at=now)) and open the "decode" stage. Then
    the endings of Lab 03, in this order, each through finish(..., new=[token], ...):
      EOS (engine.eos_token_id, unless params.ignore_eos)   STOP, text without the EOS
      token in params.stop_token_ids    STOP, stop_reason=token, text without it (with it
                                        if include_stop_str_in_output)
      a stop string in the WHOLE text   STOP, stop_reason=the string, text cut before it
                                        (first_stop; after it with include_stop_str_in_output)
      len(req.tokens) == max_tokens     LENGTH, the whole text
    Still running: stream only the text that can no longer become part of a stop string
    (holdback_length; nothing held with include_stop_str_in_output), and never a trailing
    "\ufffd" (half a character); advance req.sent and return
    RequestOutput(req.id, [token], delta, None, None, list(req.tokens), engine.usage(req)).
    """
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
    held = 0 if p.include_stop_str_in_output else holdback_length(raw, list(p.stop))
    safe = len(raw) - held
    while safe > req.sent and raw[safe - 1] == "\ufffd":
        safe -= 1
    delta = raw[req.sent:safe] if safe > req.sent else ""
    req.sent = max(req.sent, safe)
    return RequestOutput(req.id, [token], delta, None, None, list(req.tokens), engine.usage(req))


def finish(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None):
    """End a request NOW and return its last RequestOutput.

    In this order: release its cache (blocks back to the pool in this very step) and set
    req.cache = None; remove it from engine.running or engine.waiting; count it in
    engine.finished_by_reason[str(reason)]; keep the whole result in
    engine.finished[req.id] = RequestOutput(req.id, list(req.tokens), full_text, reason,
    stop_reason, list(req.tokens), engine.usage(req), error); end its spans
    (engine.trace("end_request", req.id, str(reason), at=now)).
    full_text is `text`, or engine.text(req.tokens) when text is None. The returned output
    carries the tokens `new`, the part of full_text not streamed yet (from req.sent on),
    reason, stop_reason, every raw token, the usage and the error.
    """
    if req.cache is not None:
        req.cache.release()
        req.cache = None
    if req in engine.running:
        engine.running.remove(req)
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


def abort_request(engine, request_id):
    """The client went away: end request_id now with CANCELLED, running or waiting.

    Its blocks must be back in the pool when this returns, and no later step may
    output anything for it (finish() does both; drop the output it returns: nobody is
    listening). Its raw output stays in engine.finished. An id that is unknown or
    already finished is ignored (a late cancel is normal).
    """
    for req in list(engine.running) + list(engine.waiting):
        if req.id == request_id:
            finish(engine, req, FinishReason.CANCELLED, engine.clock())
            return


def replay_in_engine(engine_cls, record):
    """Replay one saved Lab 03 failure record through a fresh engine made by engine_cls.

    Model: ScriptedBatchedModel.from_fixture(record["fixture"], raise_at=, nan_at=) from
    record["inject"], wrapped in SimulatedCost(model, clock, fixed=seconds_per_call,
    per_token=0.0) on a new FakeClock that the engine also reads; engine_cls(model, None,
    EngineConfig(num_blocks=64, block_size=4), clock=clock). Parameters: record["params"]
    plus temperature 0 when record["seed"] is None, else temperature 1.0 and that seed.
    cancel_at (in inject): abort the request as soon as it has that many tokens and has
    not ended (cancel_at 0: right after add_request); its finish_reason is then
    "cancelled". Returns {"tokens": every token output, "text": the text deltas joined,
    "finish_reason": its wire name, "kv_blocks_used_after": engine.stats()["kv_blocks_used"]},
    or None for a record with banned_words or banned_token_ids (the engine has no content filter).
    """
    inject = record.get("inject") or {}
    if inject.get("banned_words") or inject.get("banned_token_ids"):
        return None
    fake_clock = FakeClock()
    model = ScriptedBatchedModel.from_fixture(record["fixture"], raise_at=inject.get("raise_at"),
                                              nan_at=inject.get("nan_at"))
    model = SimulatedCost(model, fake_clock, fixed=float(inject.get("seconds_per_call") or 0.0), per_token=0.0)
    engine = engine_cls(model, None, EngineConfig(num_blocks=64, block_size=4), clock=fake_clock)
    seed = record.get("seed")
    params = dict(record.get("params") or {}, temperature=0 if seed is None else 1.0, seed=seed)
    request_id = engine.add_request(list(record["prompt_ids"]), RequestParams(**params))
    tokens, text, reason = [], "", None
    cancel_at = inject.get("cancel_at")
    if cancel_at == 0:
        engine.abort(request_id)
        reason = "cancelled"
    while engine.has_unfinished():
        for out in engine.step():
            tokens += list(out.new_token_ids)
            text += out.text_delta
            if out.finish_reason is not None:
                reason = str(out.finish_reason)
        if reason is None and cancel_at is not None and len(tokens) >= cancel_at:
            engine.abort(request_id)
            reason = "cancelled"
    return {"tokens": tokens, "text": text, "finish_reason": reason,
            "kv_blocks_used_after": engine.stats()["kv_blocks_used"]}
