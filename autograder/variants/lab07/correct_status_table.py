"""A correct engine written another way: one table of requests with a status field
("waiting", "running") and arrival numbers instead of a queue and a list; the schedule
is computed by sorting on arrival; endings are found by a table of checks."""
import itertools
import random

import torch

from course.batched import (EngineConfig, QueueFull, RequestOutput, RequestParams, RequestRefused,
                            ScriptedBatchedModel, SimulatedCost, as_batched)
from course.clock import FakeClock, monotonic
from course.finish import FinishReason
from course.generation import first_stop, holdback_length
from course.paged_kv import PagedKVCache, blocks_needed
from course.sampling import sample_next

EXPECT_FAIL = {}


class Engine:
    def __init__(self, model, tokenizer=None, config=None, clock=monotonic, tracer=None):
        self.model = as_batched(model)
        self.cfg = config or EngineConfig()
        self.clock, self.tracer = clock, tracer
        src = tokenizer if tokenizer is not None else self.model
        self.decode = getattr(src, "decode", None) or (lambda ids: "")
        self.eos = getattr(src, "eos_token_id", None)
        self.pool = self.model.new_pool(self.cfg.num_blocks, self.cfg.block_size)
        self.table = {}                 # id -> dict(status, order, prompt, params, out, cache, ...)
        self.order = itertools.count()  # arrival (and re-queue) order
        self.preempted = 0

    def _t(self, name, *a, **kw):
        if self.tracer is not None:
            getattr(self.tracer, name)(*a, **kw)

    def _by_status(self, status):
        return sorted((r for r in self.table.values() if r["status"] == status), key=lambda r: r["order"])

    def add_request(self, prompt_ids, params=None, request_id=None):
        if not isinstance(prompt_ids, (list, tuple)) or len(prompt_ids) == 0 or any(
                type(t) is not int or not 0 <= t < self.model.vocab_size for t in prompt_ids):
            raise ValueError(f"`prompt_ids` must be a non-empty list of ids below {self.model.vocab_size}, "
                             f"got {prompt_ids!r}.")
        p = RequestParams.coerce(params)
        need = len(prompt_ids) + p.max_tokens - 1
        if blocks_needed(need, self.cfg.block_size) > self.cfg.num_blocks or \
                blocks_needed(len(prompt_ids), self.cfg.block_size) + self.cfg.watermark_blocks > self.cfg.num_blocks \
                or need > getattr(self.model, "max_context", need):
            raise RequestRefused(f"a request of {need} tokens can never fit the pool or the context.")
        if len(self._by_status("waiting")) >= self.cfg.max_waiting:
            raise QueueFull(f"max_waiting={self.cfg.max_waiting} requests are already waiting.")
        rid = request_id or f"r{len(self.table)}-{random.getrandbits(32):08x}"
        now = self.clock()
        self.table[rid] = {"id": rid, "status": "waiting", "order": next(self.order), "arrival": now,
                           "prompt": list(prompt_ids), "params": p, "out": [], "cache": None, "sent": 0,
                           "gen": None, "stage": "queue"}
        self._t("start_request", rid, arrival_time=now, attributes={})
        return rid

    def has_unfinished(self):
        return bool(self.table)

    def stats(self):
        a = self.pool.allocator
        return {"running": len(self._by_status("running")), "waiting": len(self._by_status("waiting")),
                "kv_blocks_used": a.num_used, "kv_blocks_total": a.num_blocks, "preemptions": self.preempted,
                "finished_by_reason": {}}

    def abort(self, request_id):
        r = self.table.get(request_id)
        if r is not None:
            self._end(r, FinishReason.CANCELLED, self.clock())

    def _stage(self, r, stage, at):
        if r["stage"] != stage:
            r["stage"] = stage
            self._t("start_stage", r["id"], stage, at=at)

    def _end(self, r, reason, at, text=None, stop_reason=None, error=None, new=()):
        if r["cache"] is not None:
            r["cache"].release()
        del self.table[r["id"]]
        full = self.decode(r["out"]) if text is None and r["out"] else (text or "")
        self._t("end_request", r["id"], str(reason), at=at)
        usage = {"prompt_tokens": len(r["prompt"]), "completion_tokens": len(r["out"])}
        return RequestOutput(r["id"], list(new), full[r["sent"]:], reason, stop_reason, list(r["out"]), usage, error)

    def step(self):
        outputs = []
        now = self.clock()
        for r in sorted(self.table.values(), key=lambda r: r["order"]):
            d = r["params"].deadline
            if d is not None and now - r["arrival"] >= d:
                outputs.append(self._end(r, FinishReason.TIMEOUT, now))
        bs, alloc = self.cfg.block_size, self.pool.allocator

        def missing(r):
            have = len(r["cache"].block_table) if r["cache"] is not None else 0
            return max(0, blocks_needed(len(r["prompt"]) + len(r["out"]), bs) - have)

        running = self._by_status("running")
        kicked = False
        while running and sum(missing(r) for r in running) > alloc.num_free:
            victim = running.pop()                      # the newest
            victim["cache"].release()
            victim.update(status="waiting", cache=None, order=min(w["order"] for w in self.table.values()) - 1)
            self.preempted += 1
            self._stage(victim, "queue", self.clock())
            kicked = True
        for r in running:
            r["cache"].reserve(len(r["prompt"]) + len(r["out"]) - r["cache"].length)
        if not kicked:
            for r in self._by_status("waiting"):
                if len(running) >= self.cfg.max_batch or \
                        alloc.num_free - blocks_needed(len(r["prompt"]) + len(r["out"]), bs) < self.cfg.watermark_blocks:
                    break
                r.update(status="running", cache=PagedKVCache(self.pool))
                r["cache"].reserve(len(r["prompt"]) + len(r["out"]))
                running.append(r)
                self._stage(r, "prefill", self.clock())
        if running:
            seqs = [r["prompt"] + r["out"] for r in running]
            try:
                rows = list(self.model.forward_batch(seqs, [r["cache"] for r in running]))
            except Exception:
                rows = []
                for r, seq in zip(running, seqs):
                    r["cache"].release()
                    r["cache"].reserve(len(seq))
                    try:
                        rows.append(self.model.forward_batch([seq], [r["cache"]])[0])
                    except Exception as e:
                        rows.append(e)
            at = self.clock()
            for r, row in zip(running, rows):
                outputs.append(self._after(r, row, at))
        self._t("counter", "batch_size", len(running), at=self.clock())
        self._t("counter", "kv_blocks_in_use", alloc.num_used, at=self.clock())
        return outputs

    def _after(self, r, row, at):
        p = r["params"]
        try:
            if isinstance(row, Exception):
                raise row
            if bool(torch.isnan(row).any()):
                raise ValueError("NaN logits")
            if p.temperature == 0:
                tok = int(torch.argmax(row))
            else:
                if r["gen"] is None:
                    seed = p.seed if p.seed is not None else random.randrange(2 ** 62)
                    r["gen"] = torch.Generator(device=row.device).manual_seed(seed)
                tok = int(sample_next(row.float(), temperature=p.temperature, top_k=p.top_k, top_p=p.top_p,
                                      generator=r["gen"]))
        except Exception as e:
            return self._end(r, FinishReason.ERROR, at, error=repr(e))
        r["out"].append(tok)
        self._t("token", r["id"], at=at)
        self._stage(r, "decode", at)
        raw = self.decode(r["out"])
        without_last = self.decode(r["out"][:-1]) if len(r["out"]) > 1 else ""
        hit = first_stop(raw, list(p.stop))
        checks = [
            (tok == self.eos and not p.ignore_eos, lambda: (without_last, None)),
            (tok in p.stop_token_ids, lambda: (raw if p.include_stop_str_in_output else without_last, tok)),
            (hit is not None, lambda: (raw[:hit[1]] if p.include_stop_str_in_output else raw[:hit[0]], hit[2])),
        ]
        for fired, result in checks:
            if fired:
                text, why = result()
                return self._end(r, FinishReason.STOP, at, text=text, stop_reason=why, new=[tok])
        if len(r["out"]) >= p.max_tokens:
            return self._end(r, FinishReason.LENGTH, at, text=raw, new=[tok])
        hold = 0 if p.include_stop_str_in_output else holdback_length(raw, list(p.stop))
        safe = len(raw) - hold
        while safe > r["sent"] and raw[safe - 1] == "\ufffd":
            safe -= 1
        delta, r["sent"] = raw[r["sent"]:max(safe, r["sent"])], max(safe, r["sent"])
        usage = {"prompt_tokens": len(r["prompt"]), "completion_tokens": len(r["out"])}
        return RequestOutput(r["id"], [tok], delta, None, None, list(r["out"]), usage)


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
                             RequestParams(**dict(record["params"], temperature=1.0 if seed is not None else 0,
                                                  seed=seed)))
    got = {"tokens": [], "text": "", "finish_reason": None}
    if inj.get("cancel_at") == 0:
        engine.abort(rid)
        got["finish_reason"] = "cancelled"
    while engine.has_unfinished():
        for out in engine.step():
            got["tokens"].extend(out.new_token_ids)
            got["text"] += out.text_delta
            got["finish_reason"] = str(out.finish_reason) if out.finish_reason else None
        if got["finish_reason"] is None and inj.get("cancel_at") is not None \
                and len(got["tokens"]) >= inj["cancel_at"]:
            engine.abort(rid)
            got["finish_reason"] = "cancelled"
    got["kv_blocks_used_after"] = engine.pool.allocator.num_used
    return got
