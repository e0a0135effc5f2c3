"""A small serving engine: continuous batching over one paged KV pool. Defined in lab07.

    engine = Engine(decoder, tokenizer, EngineConfig(num_blocks=64, block_size=16))
    rid = engine.add_request(prompt_ids, RequestParams(temperature=0, max_tokens=32))
    while engine.has_unfinished():
        for out in engine.step():          # one batched forward for every running request
            print(out.request_id, out.text_delta, out.finish_reason)
    engine.abort(rid)                      # the client went away: free its blocks now

One step. Running requests first, in one mixed batch of prefills and decodes, as vLLM's V1
scheduler does; preemption by recompute, newest first, as in nano-vllm and vLLM; the
watermark from vLLM's older (V0) block manager; method names after vLLM's engine:

    1. endings between steps   a request past its deadline ends (timeout), running or waiting
    2. blocks for the running  every running request needs room for the tokens it feeds; if the
                               pool is short, preempt the NEWEST running request (free its
                               blocks, put it back at the head of the queue: it recomputes later)
    3. admission (FCFS)        while a batch slot is free and the OLDEST waiting request's
                               tokens fit with `watermark_blocks` still free, admit it (with
                               nothing running, the watermark protects nobody: the head is
                               admitted if its tokens fit at all); never skip the head for a
                               smaller one behind it (that starves it)
    4. one forward             prefills of the admitted, recomputes of the resumed and one
                               decode for each running request, in one batch (course.batched)
    5. per request             sample (course.sampling), then the endings of Lab 03 in their
                               order: EOS, stop token, stop string, max_tokens; an ending
                               releases the request's blocks in this same step

Liveness. A request is refused at once (RequestRefused) when it could not run even
alone in an empty pool: prompt + max_tokens - 1 tokens (the last token is returned,
never fed back) need more than num_blocks blocks, or exceed the model's context. Every
other request finishes: the oldest running request is never preempted (the newest goes
first) and always fits alone, so every step that has a running request gives it a
token, and with nothing running the head of the queue is admitted. Hence, with all
requests queued, the engine needs at most sum(max_tokens) steps to finish them all.

A model error ends only the requests that cause it: when the batched forward raises,
each request is recomputed alone, and only those that fail alone end with `error`.
Text is streamed with holdback (course.generation.holdback_length), so no part of a
stop string ever reaches the client. Spans and counters go to an optional Lab 06
RequestTracer: stages queue -> prefill -> decode per request, a token event per
token, batch size and KV blocks in use per step.
"""
from __future__ import annotations

import random
import threading
from collections import OrderedDict, deque

import torch

from ._checks import check_int, check_type
from .batched import EngineConfig, QueueFull, RequestOutput, RequestParams, RequestRefused, as_batched
from .clock import monotonic
from .finish import FinishReason
from .generation import first_stop, holdback_length
from .paged_kv import PagedKVCache, blocks_needed
from .sampling import sample_next

ANSWERS_FOR = "lab07"

__all__ = ["ANSWERS_FOR", "EngineConfig", "RequestParams", "RequestOutput", "QueueFull", "RequestRefused",
           "Engine", "drain"]

KEEP_FINISHED = 4096     # final outputs kept for final_output(); the oldest are dropped first


class _Request:
    """The engine's record of one request."""

    def __init__(self, request_id: str, prompt: list[int], params: RequestParams, arrival: float) -> None:
        self.id, self.prompt, self.params, self.arrival = request_id, prompt, params, arrival
        self.tokens: list[int] = []          # generated so far: survives preemption
        self.cache: PagedKVCache | None = None
        self.generator: torch.Generator | None = None
        self.sent = 0                        # characters of text already streamed
        self.stage = "queue"                 # the tracer's open stage span
        self.preemptions = 0

    @property
    def ids(self) -> list[int]:
        return self.prompt + self.tokens

    def blocks_to_feed(self, block_size: int) -> int:
        """Blocks this request still needs to hold every token it has."""
        held = len(self.cache.block_table) if self.cache is not None else 0
        return max(0, blocks_needed(len(self.ids), block_size) - held)


class Engine:
    """Continuous batching over one paged KV pool (see the module docstring)."""

    def __init__(self, model, tokenizer=None, config: EngineConfig | None = None, clock=monotonic,
                 tracer=None) -> None:
        self.model = as_batched(model)
        self.config = EngineConfig() if config is None else check_type("config", config, EngineConfig,
                                                                       "an EngineConfig")
        if not callable(clock):
            raise ValueError(f"`clock` must be callable (course.monotonic or a FakeClock), got {clock!r}.")
        if tokenizer is not None and not callable(getattr(tokenizer, "decode", None)):
            raise ValueError(f"`tokenizer` must be None or have decode(ids), got {type(tokenizer).__name__}.")
        self.tokenizer, self.clock, self.tracer = tokenizer, clock, tracer
        text_source = tokenizer if tokenizer is not None else self.model
        self._decode = getattr(text_source, "decode", None)
        self.eos_token_id = getattr(text_source, "eos_token_id", None)
        self.pool = self.model.new_pool(self.config.num_blocks, self.config.block_size)
        self.waiting: deque[_Request] = deque()      # FCFS; preempted requests go back to the front
        self.running: list[_Request] = []            # in admission order: the newest is last
        self._finished: OrderedDict[str, RequestOutput] = OrderedDict()
        self._ids = 0
        self._lock = threading.RLock()
        self.steps = 0
        self.preemptions = 0
        self.finished_by_reason: dict[str, int] = {str(r): 0 for r in FinishReason}
        self.last_batch_tokens = 0

    # ------------------------------------------------------------ the API

    def add_request(self, prompt_ids, params=None, request_id: str | None = None) -> str:
        """Queue a request; return its id. Raises ValueError for bad arguments,
        RequestRefused when it can never run, QueueFull when the queue is full."""
        if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids:
            raise ValueError(f"`prompt_ids` must be a non-empty list of token ids, got {prompt_ids!r}.")
        prompt = [int(t) for t in prompt_ids] if all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt_ids) else None
        vocab = self.model.vocab_size
        if prompt is None or not all(0 <= t < vocab for t in prompt):
            raise ValueError(f"`prompt_ids` must hold integer ids in [0, {vocab}), got {list(prompt_ids)!r}.")
        params = RequestParams.coerce(params)
        if request_id is not None and (not isinstance(request_id, str) or not request_id):
            raise ValueError(f"`request_id` must be None or a non-empty str, got {request_id!r}.")
        cfg = self.config
        longest = len(prompt) + params.max_tokens - 1    # the last token is returned, never fed back
        context = getattr(self.model, "max_context", None)
        if context is not None and longest > context:
            raise RequestRefused(f"prompt ({len(prompt)}) + max_tokens ({params.max_tokens}) - 1 = {longest} tokens "
                                 f"exceeds the model's context of {context}.")
        if blocks_needed(longest, cfg.block_size) > cfg.num_blocks:     # could not run even alone
            raise RequestRefused(f"prompt ({len(prompt)}) + max_tokens ({params.max_tokens}) - 1 = {longest} tokens "
                                 f"need {blocks_needed(longest, cfg.block_size)} blocks of {cfg.block_size}; the "
                                 f"pool has {cfg.num_blocks}.")
        with self._lock:
            if len(self.waiting) >= cfg.max_waiting:
                raise QueueFull(f"{len(self.waiting)} requests are waiting (max_waiting={cfg.max_waiting}); "
                                "retry later.")
            if request_id is None:
                self._ids += 1
                request_id = f"req-{self._ids}"
            if request_id in self._finished or any(r.id == request_id for r in self._live()):
                raise ValueError(f"`request_id` must be unique, got {request_id!r} again.")
            now = self.clock()
            req = _Request(request_id, prompt, params, now)
            self.waiting.append(req)
            self._trace("start_request", request_id, arrival_time=now, attributes={   # opens "queue"
                "gen_ai.request.max_tokens": params.max_tokens,
                "gen_ai.request.temperature": float(params.temperature),
                "gen_ai.request.top_p": float(params.top_p),
                "gen_ai.usage.input_tokens": len(prompt),
                "course.concurrency": len(self.running) + len(self.waiting)})
            return request_id

    def step(self) -> list[RequestOutput]:
        """Run one engine step; return an output for every request that got a token or ended."""
        with self._lock:
            self.steps += 1
            outputs = self._expire(self.clock())
            batch = self._schedule()
            self.last_batch_tokens = sum(len(r.ids) - r.cache.length for r in batch)
            if batch:
                results = self._forward(batch)
                done_at = self.clock()
                for req, token in zip(batch, self._choose(batch, results)):
                    outputs.append(self._advance(req, token, done_at))
            now = self.clock()
            self._trace("counter", "batch_size", len(batch), at=now)
            self._trace("counter", "kv_blocks_in_use", self.pool.allocator.num_used, at=now)
            return outputs

    def abort(self, request_id: str) -> None:
        """Cancel a request now: its blocks go back to the pool before this returns and
        no output for it follows. Its raw output is kept (final_output). Unknown or
        already finished ids are ignored, as a late cancel must be."""
        with self._lock:
            for req in self._live():
                if req.id == request_id:
                    self._finish(req, FinishReason.CANCELLED, self.clock())
                    return

    def has_unfinished(self) -> bool:
        with self._lock:
            return bool(self.running or self.waiting)

    def stats(self) -> dict:
        with self._lock:
            a = self.pool.allocator
            return {"running": len(self.running), "waiting": len(self.waiting),
                    "kv_blocks_used": a.num_used, "kv_blocks_total": a.num_blocks,
                    "kv_blocks_high_water": a.high_water, "preemptions": self.preemptions,
                    "steps": self.steps, "last_batch_tokens": self.last_batch_tokens,
                    "finished_by_reason": dict(self.finished_by_reason)}

    def final_output(self, request_id: str) -> RequestOutput:
        """The whole result of a finished request: every raw token, the full text shown,
        the finish reason. KeyError while it runs or after it was dropped (KEEP_FINISHED)."""
        with self._lock:
            return self._finished[request_id]

    # ------------------------------------------------------------ scheduling

    def _live(self):
        return list(self.running) + list(self.waiting)

    def _expire(self, now: float) -> list[RequestOutput]:
        out = []
        for req in self._live():
            if req.params.deadline is not None and now - req.arrival >= req.params.deadline:
                out.append(self._finish(req, FinishReason.TIMEOUT, now))
        return out

    def _schedule(self) -> list[_Request]:
        bs, alloc = self.config.block_size, self.pool.allocator
        # Running requests first: each must hold every token it feeds this step.
        preempted = False
        while self.running and sum(r.blocks_to_feed(bs) for r in self.running) > alloc.num_free:
            self._preempt(self.running.pop())
            preempted = True
        for req in self.running:
            req.cache.reserve(len(req.ids) - req.cache.length)
        # Then admission, strictly first come first served.
        if not preempted:
            while self.waiting and len(self.running) < self.config.max_batch:
                head = self.waiting[0]
                if alloc.num_free - blocks_needed(len(head.ids), bs) < self._blocks_kept_back():
                    break
                self.waiting.popleft()
                head.cache = PagedKVCache(self.pool)
                head.cache.reserve(len(head.ids))
                self.running.append(head)
                self._stage(head, "prefill", self.clock())
        return list(self.running)

    def _blocks_kept_back(self) -> int:
        """Free blocks admission must leave: the watermark keeps room for the running
        requests' next tokens. With none running it protects nobody, and keeping it would
        leave a head that needs more than num_blocks - watermark waiting forever."""
        return self.config.watermark_blocks if self.running else 0

    def _preempt(self, req: _Request) -> None:
        req.cache.release()
        req.cache = None
        req.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)
        self._stage(req, "queue", self.clock())
        self._trace("counter", "preemptions", self.preemptions, at=self.clock())

    # ------------------------------------------------------------ the forward and each request

    def _forward(self, batch: list[_Request]):
        """The batch's logits (B, V); or, when the batched forward raised, per request
        its logits (1, V) alone or the exception it raised alone."""
        try:
            return self.model.forward_batch([r.ids for r in batch], [r.cache for r in batch])   # (B, V)
        except Exception as batch_error:
            if len(batch) == 1:
                return [batch_error]
        # Someone in the batch broke the forward. Recompute each request alone (the
        # failed call may have half-written the caches) and blame only those that fail.
        results = []
        for req in batch:
            req.cache.release()
            req.cache.reserve(len(req.ids))
            try:
                results.append(self.model.forward_batch([req.ids], [req.cache]))    # (1, V)
            except Exception as e:
                results.append(e)
        return results

    def _choose(self, batch: list[_Request], logits) -> list:
        """Per request, the token it chose, or the exception that ends it with `error`:
        its forward raised, its logits hold a NaN, or sampling raised. One max over the
        whole batch gives every row's greedy token (the first largest, as argmax) and, as
        NaN propagates through max, tells which rows hold a NaN: one op and two lists for
        the batch, where ops and conversions per row would cost more than the rows."""
        if not isinstance(logits, torch.Tensor):     # the batch failed: each request ran alone
            return [row if isinstance(row, Exception) else self._choose([req], row)[0]
                    for req, row in zip(batch, logits)]
        top, greedy = logits.max(dim=-1)                         # (B,), (B,)
        has_nan, greedy = torch.isnan(top).tolist(), greedy.tolist()
        chosen = []
        for i, req in enumerate(batch):
            try:
                if has_nan[i]:
                    raise ValueError(f"the model returned NaN logits at step {len(req.tokens)}")
                chosen.append(greedy[i] if req.params.temperature == 0 else self._sample(req, logits[i]))
            except Exception as e:
                chosen.append(e)
        return chosen

    def _advance(self, req: _Request, token, now: float) -> RequestOutput:
        """Take the token _choose gave the request (or end it with its error), then the
        endings of Lab 03 in their order; a request still running streams its safe text."""
        if isinstance(token, Exception):
            return self._finish(req, FinishReason.ERROR, now, error=f"{type(token).__name__}: {token}")
        req.tokens.append(token)
        self._trace("token", req.id, at=now)       # chosen at the end of this forward ...
        self._stage(req, "decode", now)            # ... and the next one is a decode
        p = req.params
        if token == self.eos_token_id and not p.ignore_eos:
            return self._finish(req, FinishReason.STOP, now, new=[token], text=self._text(req.tokens[:-1]))
        if token in p.stop_token_ids:
            keep = req.tokens if p.include_stop_str_in_output else req.tokens[:-1]
            return self._finish(req, FinishReason.STOP, now, new=[token], text=self._text(keep), stop_reason=token)
        raw = self._text(req.tokens)
        match = first_stop(raw, list(p.stop))
        if match is not None:
            i, j, s = match
            return self._finish(req, FinishReason.STOP, now, new=[token],
                                text=raw[:j] if p.include_stop_str_in_output else raw[:i], stop_reason=s)
        if len(req.tokens) == p.max_tokens:
            return self._finish(req, FinishReason.LENGTH, now, new=[token], text=raw)
        # Still running: release only text that can no longer become part of a stop string
        # (nor of an unfinished UTF-8 character). A trailing "\ufffd" is half a character
        # that comes whole with the next token: step back over it BEFORE the holdback, so
        # text just before it ("o" of a stop string "o\u4e2d!") is held too.
        end = len(raw)
        while end > req.sent and raw[end - 1] == "\ufffd":
            end -= 1
        held = 0 if p.include_stop_str_in_output else holdback_length(raw[:end], list(p.stop))
        safe = end - held
        delta = raw[req.sent:safe] if safe > req.sent else ""
        req.sent = max(req.sent, safe)
        return RequestOutput(req.id, [token], delta, None, None, list(req.tokens), self._usage(req))

    def _sample(self, req: _Request, logits: torch.Tensor) -> int:
        """A token drawn from logits (V,) at the request's temperature, with its own generator."""
        p = req.params
        if req.generator is None:
            seed = p.seed if p.seed is not None else random.SystemRandom().randrange(2 ** 63)
            req.generator = torch.Generator(device=logits.device).manual_seed(int(seed))
        return int(sample_next(logits.float(), temperature=p.temperature, top_k=p.top_k, top_p=p.top_p,
                               generator=req.generator))

    def _finish(self, req: _Request, reason: FinishReason, now: float, *, new=(), text=None,
                stop_reason=None, error=None) -> RequestOutput:
        """End a request: blocks back to the pool NOW, out of every queue, final output kept."""
        if req.cache is not None:
            req.cache.release()
            req.cache = None
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        full = self._text(req.tokens) if text is None else text
        delta = full[req.sent:]
        req.sent = len(full)
        self.finished_by_reason[str(reason)] += 1
        self._finished[req.id] = RequestOutput(req.id, list(req.tokens), full, reason, stop_reason,
                                               list(req.tokens), self._usage(req), error)
        while len(self._finished) > KEEP_FINISHED:
            self._finished.popitem(last=False)
        attrs = {"course.kv_cache_released": True, "course.preemptions": req.preemptions}
        if error is not None:
            attrs["error.type"] = error.split(":")[0]
        self._trace("end_request", req.id, str(reason), at=now, **attrs)
        return RequestOutput(req.id, list(new), delta, reason, stop_reason, list(req.tokens), self._usage(req), error)

    # ------------------------------------------------------------ helpers

    def _text(self, tokens: list[int]) -> str:
        return self._decode(tokens) if self._decode is not None and tokens else ""

    @staticmethod
    def _usage(req: _Request) -> dict:
        return {"prompt_tokens": len(req.prompt), "completion_tokens": len(req.tokens)}

    def _stage(self, req: _Request, stage: str, at: float) -> None:
        if req.stage != stage:
            req.stage = stage
            # a prefill's span carries the tokens it feeds: the prompt, and for a recompute the tokens too
            fed = {"gen_ai.usage.input_tokens": len(req.ids)} if stage == "prefill" else None
            self._trace("start_stage", req.id, stage, at=at, attributes=fed)

    def _trace(self, method: str, *args, **kwargs) -> None:
        if self.tracer is not None:
            getattr(self.tracer, method)(*args, **kwargs)

    def __repr__(self) -> str:
        s = self.stats()
        return (f"Engine(running={s['running']}, waiting={s['waiting']}, "
                f"kv_blocks={s['kv_blocks_used']}/{s['kv_blocks_total']}, preemptions={s['preemptions']})")


def drain(engine: Engine, max_steps: int = 100_000, on_step=None) -> dict[str, RequestOutput]:
    """Step until nothing is left; return {request_id: final output} of every request
    that finished meanwhile. on_step(engine, outputs) runs after each step (e.g. to
    advance a FakeClock or abort a request)."""
    check_type("engine", engine, Engine, "an Engine")
    check_int("max_steps", max_steps, 1)
    done: dict[str, RequestOutput] = {}
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return done
        outputs = engine.step()
        for out in outputs:
            if out.finished:
                done[out.request_id] = engine.final_output(out.request_id)
        if on_step is not None:
            on_step(engine, outputs)
    if not engine.has_unfinished():
        return done
    raise RuntimeError(f"the engine still had unfinished requests after max_steps={max_steps} steps.")
