"""A correct engine written another way: block counts by ceiling division, a table of endings,
abort through a list comprehension, preemption by index, replay with the cancel check at the
top of the loop."""
from collections import deque

import torch

from course.batched import (EngineConfig, QueueFull, RequestOutput, RequestParams, RequestRefused,
                            ScriptedBatchedModel, SimulatedCost, as_batched)
from course.clock import FakeClock, monotonic
from course.finish import FinishReason
from course.generation import first_stop, holdback_length
from course.paged_kv import PagedKVCache, blocks_needed
from course.sampling import sample_next


EXPECT_FAIL = {}


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
        """Open span `stage` ("queue", "prefill", "decode") for req, unless it is open already;
        a prefill's span records the tokens it feeds."""
        if req.stage != stage:
            req.stage = stage
            fed = {"gen_ai.usage.input_tokens": len(req.ids)} if stage == "prefill" else None
            self.trace("start_stage", req.id, stage, at=at, attributes=fed)

    def trace(self, method, *args, **kwargs):
        """tracer.method(*args, **kwargs), or nothing without a tracer."""
        if self.tracer is not None:
            getattr(self.tracer, method)(*args, **kwargs)


def check_admission(engine, prompt_ids, params):
    cfg, model = engine.config, engine.model
    ok = isinstance(prompt_ids, (list, tuple)) and len(prompt_ids) > 0 and all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < model.vocab_size for t in prompt_ids)
    if not ok:
        raise ValueError(f"`prompt_ids` must be a non-empty list of ids below {model.vocab_size}, got {prompt_ids!r}.")
    p = RequestParams.coerce(params)
    tokens = len(prompt_ids) + p.max_tokens - 1
    reasons = []
    if tokens > getattr(model, "max_context", tokens):
        reasons.append("longer than the model's context")
    if -(-tokens // cfg.block_size) > cfg.num_blocks:
        reasons.append("more blocks than the pool has")
    if reasons:
        raise RequestRefused(f"refused: {', '.join(reasons)} ({tokens} tokens).")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull("the queue is full")
    return p


def _need(engine, req):
    have = 0 if req.cache is None else len(req.cache.block_table)
    return max(0, -(-len(req.ids) // engine.config.block_size) - have)


def schedule(engine):
    free = lambda: engine.pool.allocator.num_free  # noqa: E731
    kicked = []
    while engine.running and sum(_need(engine, r) for r in engine.running) > free():
        req = engine.running[-1]
        del engine.running[-1]
        req.cache.release()
        req.cache = None
        req.preemptions, engine.preemptions = req.preemptions + 1, engine.preemptions + 1
        engine.waiting.insert(0, req)
        engine.stage(req, "queue", engine.clock())
        kicked.append(req)
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    while not kicked and engine.waiting and len(engine.running) < engine.config.max_batch:
        head = engine.waiting[0]
        reserve = engine.config.watermark_blocks if engine.running else 0
        if free() - -(-len(head.ids) // engine.config.block_size) < reserve:
            break
        cache = PagedKVCache(engine.pool)
        cache.reserve(len(head.ids))
        head.cache = cache
        engine.running.append(engine.waiting.popleft())
        engine.stage(head, "prefill", engine.clock())
    return engine.running[:]


def run_batch(engine, batch):
    def forward(reqs):
        return engine.model.forward_batch([r.ids for r in reqs], [r.cache for r in reqs])
    try:
        return list(forward(batch).unbind(0))
    except Exception as e:
        if len(batch) < 2:
            return [e]
    out = []
    for req in batch:
        req.cache.release()
        req.cache.reserve(len(req.ids))
        try:
            out.append(forward([req])[0])
        except Exception as e:
            out.append(e)
    return out


def advance(engine, req, logits, now):
    def end(reason, **kw):
        return finish(engine, req, reason, now, **kw)
    if isinstance(logits, BaseException):
        return end(FinishReason.ERROR, error=repr(logits))
    if not bool(torch.isfinite(logits).any()) or bool(logits.isnan().any()):
        return end(FinishReason.ERROR, error="NaN logits")
    try:
        tok = engine.sample(req, logits)
    except Exception as e:
        return end(FinishReason.ERROR, error=repr(e))
    req.tokens.append(tok)
    engine.trace("token", req.id, at=now)
    engine.stage(req, "decode", now)
    p = req.params
    raw = engine.text(req.tokens)
    before = engine.text(req.tokens[:-1])
    hit = first_stop(raw, list(p.stop))
    endings = [
        (tok == engine.eos_token_id and not p.ignore_eos, lambda: (before, None)),
        (tok in p.stop_token_ids, lambda: (raw if p.include_stop_str_in_output else before, tok)),
        (hit is not None, lambda: (raw[:hit[1]] if p.include_stop_str_in_output else raw[:hit[0]], hit[2])),
    ]
    for fired, result in endings:
        if fired:
            text, why = result()
            return end(FinishReason.STOP, new=[tok], text=text, stop_reason=why)
    if len(req.tokens) >= p.max_tokens:
        return end(FinishReason.LENGTH, new=[tok], text=raw)
    whole = len(raw.rstrip("\ufffd"))          # the characters complete so far
    keep = whole - (0 if p.include_stop_str_in_output else holdback_length(raw[:whole], list(p.stop)))
    delta = raw[req.sent:keep]
    req.sent = max(req.sent, keep)
    return RequestOutput(req.id, [tok], delta, None, None, list(req.tokens), engine.usage(req))


def finish(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None):
    cache, req.cache = req.cache, None
    if cache is not None:
        cache.release()
    for queue in (engine.running, engine.waiting):
        if req in queue:
            queue.remove(req)
    full = engine.text(req.tokens) if text is None else text
    engine.finished_by_reason[reason.value] = engine.finished_by_reason.get(reason.value, 0) + 1
    usage = engine.usage(req)
    engine.finished[req.id] = RequestOutput(req.id, list(req.tokens), full, reason, stop_reason, list(req.tokens),
                                            usage, error)
    engine.trace("end_request", req.id, reason.value, at=now)
    delta, req.sent = full[req.sent:], len(full)
    return RequestOutput(req.id, list(new), delta, reason, stop_reason, list(req.tokens), usage, error)


def abort_request(engine, request_id):
    found = [r for r in [*engine.running, *engine.waiting] if r.id == request_id]
    if found:
        finish(engine, found[0], FinishReason.CANCELLED, engine.clock())


def replay_in_engine(engine_cls, record):
    inj = dict(record.get("inject") or {})
    if inj.get("banned_words") or inj.get("banned_token_ids"):
        return None
    clock = FakeClock()
    model = SimulatedCost(ScriptedBatchedModel.from_fixture(record["fixture"], raise_at=inj.get("raise_at"),
                                                            nan_at=inj.get("nan_at")),
                          clock, float(inj.get("seconds_per_call") or 0), 0.0)
    engine = engine_cls(model, None, EngineConfig(num_blocks=64, block_size=4), clock=clock)
    seed = record.get("seed")
    rid = engine.add_request(list(record["prompt_ids"]),
                             dict(record["params"], temperature=0 if seed is None else 1.0, seed=seed))
    got = {"tokens": [], "text": "", "finish_reason": None}
    cancel_at = inj.get("cancel_at")
    while True:
        if got["finish_reason"] is None and cancel_at is not None and len(got["tokens"]) >= cancel_at:
            engine.abort(rid)
            got["finish_reason"] = "cancelled"
        if not engine.has_unfinished():
            break
        for out in engine.step():
            got["tokens"].extend(out.new_token_ids)
            got["text"] += out.text_delta
            if out.finish_reason is not None:
                got["finish_reason"] = out.finish_reason.value
    got["kv_blocks_used_after"] = engine.pool.allocator.num_used
    return got
