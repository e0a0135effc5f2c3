"""lab07's mutation triage (see autograder/mutation.py): survivors read by hand.

EQUIVALENT: no correct solution can be told apart from the mutant (the reason).
GAPS: a clause no hidden case exercises yet (what a case would have to do).
Keys are (module, the mutated line as mutmut writes it, stripped), as in mutation.EQUIVALENT.

lab07's student writes the functions the notebook's given Engine calls (check_admission,
schedule, run_batch, advance, finish, abort_request) and replay_in_engine; the judges rerun
each trace on course.engine.Engine. What course.engine has beyond that contract (request_id
checks and generated ids, stats' steps and last_batch_tokens, span attributes, the
preemptions counter track, final_output's bound, drain, __repr__) is no part of what a
submission can be told apart by.
"""

_ENGINE = "course.engine"
_NOT_IN_NOTEBOOK = "is course.engine's alone: the notebook's given Engine has no such thing and no judge reads it"

EQUIVALENT: dict[tuple[str, str], str] = {
    # --- the reference's replay_in_engine
    ("autograder.reference.lab07", "engine = engine_cls(model, None, EngineConfig(num_blocks=65, block_size=4), clock=clock)"):
        "a Lab 03 record is at most 24 tokens: it fits 64 or 65 blocks, and the pool is empty after either way",
    ("autograder.reference.lab07", "engine = engine_cls(model, None, EngineConfig(num_blocks=64, block_size=5), clock=clock)"):
        "a Lab 03 record fits blocks of 4 or 5 alike; blocks used after is 0 either way (no case can see the size)",
    # --- course.batched helpers the judges call with fixed arguments
    ("course.batched", "block_size: int = 17) -> tuple[list[int], list[torch.Tensor]]:"):
        "solo_greedy's block size changes where keys are stored, not the logits: tokens and logits are the same",
    ("course.batched", 'check_int("max_tokens", max_tokens, 2)'):
        "the judges call solo_greedy with max_tokens >= 10; the bound is the course helper's own argument check",
    # --- metadata, annotations, bounds no trace reaches
    (_ENGINE, 'ANSWERS_FOR = "XXlab07XX"'): "module metadata for the course's tooling, not engine behaviour",
    (_ENGINE, "ANSWERS_FOR = None"): "module metadata for the course's tooling, not engine behaviour",
    (_ENGINE, "KEEP_FINISHED = 4097     # final outputs kept for final_output(); the oldest are dropped first"):
        "the bound on kept outputs " + _NOT_IN_NOTEBOOK + " (no trace ends 4096 requests)",
    (_ENGINE, "while len(self._finished) >= KEEP_FINISHED:"):
        "differs only once 4096 outputs are kept; no trace ends that many (the notebook's engine.finished has no bound)",
    (_ENGINE, "self._finished.popitem(last=True)"):
        "runs only past 4096 kept outputs; no trace ends that many (the notebook's engine.finished has no bound)",
    (_ENGINE, "self.cache: PagedKVCache & None = None"): "an annotation (the module has `from __future__ import annotations`)",
    (_ENGINE, "self.generator: torch.Generator & None = None"): "an annotation (never evaluated)",
    (_ENGINE, 'self.stage = "XXqueueXX"                 # the tracer\'s open stage span'):
        "the first stage ever opened is prefill (or none): any initial value other than prefill/decode opens the same spans",
    (_ENGINE, "self.stage = None                 # the tracer's open stage span"):
        "the first stage ever opened is prefill (or none): any initial value other than prefill/decode opens the same spans",
    (_ENGINE, "held = len(self.cache.block_table) if self.cache is not None else 1"):
        "blocks_to_feed is called only for running requests, which always hold a cache",
    # --- request ids: the notebook's add_request generates req-N unchecked; traces never pass one
    (_ENGINE, "self._ids = 1"): "generated ids are opaque: every trace maps them back to its own names",
    (_ENGINE, "self._ids -= 1"): "generated ids stay unique (req--1, req--2, ...): every trace maps them back by id",
    (_ENGINE, "self._ids += 2"): "generated ids stay unique (req-2, req-4, ...): every trace maps them back by id",
    (_ENGINE, 'request_id = f"XXreq-{self._ids}XX"'): "generated ids are opaque: every trace maps them back by id",
    (_ENGINE, "if request_id is not None and ( isinstance(request_id, str) or not request_id):"):
        "request_id validation " + _NOT_IN_NOTEBOOK + " (no trace passes a request_id)",
    (_ENGINE, "if request_id is not None and (not isinstance(request_id, str) or  request_id):"):
        "request_id validation " + _NOT_IN_NOTEBOOK + " (no trace passes a request_id)",
    (_ENGINE, "if request_id is not None and (not isinstance(request_id, str) and not request_id):"):
        "request_id validation " + _NOT_IN_NOTEBOOK + " (no trace passes a request_id)",
    (_ENGINE, "if request_id in self._finished and any(r.id == request_id for r in self._live()):"):
        "the duplicate-id check " + _NOT_IN_NOTEBOOK + " (generated ids never repeat)",
    (_ENGINE, '"course.concurrency": len(self.running) - len(self.waiting)})'):
        "a span attribute " + _NOT_IN_NOTEBOOK + " (the notebook's add_request sets max_tokens and input_tokens only)",
    # --- stats fields and counters only course.engine has
    (_ENGINE, "self.steps = 1"): "stats()['steps'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "self.steps -= 1"): "stats()['steps'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "self.steps += 2"): "stats()['steps'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "self.last_batch_tokens = 1"): "stats()['last_batch_tokens'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "self.last_batch_tokens = None"): "stats()['last_batch_tokens'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "self.last_batch_tokens = sum(len(r.ids) + r.cache.length for r in batch)"):
        "stats()['last_batch_tokens'] " + _NOT_IN_NOTEBOOK,
    (_ENGINE, 'return {"XXrunningXX": len(self.running), "waiting": len(self.waiting),'):
        "the judges read only kv_blocks_used of the reference's stats(); the notebook's stats() is given code",
    (_ENGINE, 'return {"running": len(self.running), "XXwaitingXX": len(self.waiting),'):
        "the judges read only kv_blocks_used of the reference's stats(); the notebook's stats() is given code",
    (_ENGINE, 'self._trace("counter", "XXpreemptionsXX", self.preemptions, at=self.clock())'):
        "the preemptions counter track " + _NOT_IN_NOTEBOOK + " (the contract's counters are batch_size and kv_blocks_in_use)",
    (_ENGINE, 'attrs = {"XXcourse.kv_cache_releasedXX": True, "course.preemptions": req.preemptions}'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs = {"course.kv_cache_released": False, "course.preemptions": req.preemptions}'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs = {"course.kv_cache_released": True, "XXcourse.preemptionsXX": req.preemptions}'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs["XXerror.typeXX"] = error.split(":")[0]'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs["error.type"] = error.split("XX:XX")[0]'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs["error.type"] = error.split(":")[1]'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    (_ENGINE, 'attrs["error.type"] = None'):
        "an end_request attribute " + _NOT_IN_NOTEBOOK + " (the notebook's finish() ends spans with the reason only)",
    # --- times passed to the tracer: at=None reads the same FakeClock, which no one advances in between
    (_ENGINE, "done_at = None"):
        "done_at only timestamps the token and end events; the tracer reads clock() for at=None, the same instant",
    (_ENGINE, "now = None"): "the counters' at=None makes the tracer read clock(), the same instant",
    # --- scheduling facts that make a mutant unobservable
    (_ENGINE, "preempted = None"): "None and False are both falsy: admission runs exactly as before",
    (_ENGINE, "preempted = False"):
        "after a preemption the head is the preempted request, which needs every block it held plus the one that "
        "did not fit: it can never be admitted in that step, so skipping admission changes nothing",
    # --- streaming edges that slicing already covers
    (_ENGINE, 'while end >= req.sent and raw[end - 1] == "\\ufffd":'):
        "at end == sent the loop can only lower end below sent, and safe <= end: the delta is still \"\" and sent = "
        "max(sent, safe), as when the loop stops at sent",
    (_ENGINE, "top, greedy = logits.max(dim=+1)                         # (B,), (B,)"):
        "the batch's logits are always (B, V): dim=1 is dim=-1",
    (_ENGINE, 'delta = raw[req.sent:safe] if safe >= req.sent else ""'):
        "raw[sent:safe] is \"\" when safe == sent, as the else branch gives",
    (_ENGINE, "req.sent = None"): "a finished request leaves every queue: its sent count is never read again",
    (_ENGINE, 'req.cache = ""'):
        "the line in _finish: a finished request leaves every queue and nothing reads its cache again (the same "
        "mutant in _preempt is killed by abort_a_preempted_request)",
    # --- unseeded sampling cannot be repeated by any judge
    (_ENGINE, "seed = p.seed if p.seed is not None else random.SystemRandom().randrange(3 ** 63)"):
        "an unseeded draw is random by contract; no judge can compare it",
    (_ENGINE, "seed = p.seed if p.seed is not None else random.SystemRandom().randrange(2 * 63)"):
        "an unseeded draw is random by contract; no judge can compare it",
    (_ENGINE, "seed = p.seed if p.seed is not None else random.SystemRandom().randrange(2 ** 64)"):
        "an unseeded draw is random by contract; no judge can compare it",
    # --- __repr__ and drain: course.engine's own conveniences
    (_ENGINE, "s = None"): "__repr__ " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "return (f\"Engine(running={s['XXrunningXX']}, waiting={s['waiting']}, \""): "__repr__ " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "return (f\"Engine(running={s['running']}, waiting={s['XXwaitingXX']}, \""): "__repr__ " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "return (f\"XXEngine(running={s['running']}, waiting={s['waiting']}, XX\""): "__repr__ " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "def drain(engine: Engine, max_steps: int = 100001, on_step=None) -> dict[str, RequestOutput]:"):
        "drain " + _NOT_IN_NOTEBOOK + " (the judges step engines themselves)",
    (_ENGINE, 'check_int("max_steps", max_steps, 2)'): "drain " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "done: dict[str, RequestOutput] = None"): "drain " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "if  engine.has_unfinished():"): "drain " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "outputs = None"): "drain " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "done[out.request_id] = None"): "drain " + _NOT_IN_NOTEBOOK,
    (_ENGINE, "if on_step is  None:"): "drain " + _NOT_IN_NOTEBOOK,
    # --- engine.text with nothing to decode with
    (_ENGINE, "return self._decode(tokens) if self._decode is not None or tokens else \"\""):
        "text without a tokenizer or a model's decode is the notebook's given Engine.text (a locked cell: \"\" "
        "without a tokenizer), the same in every submission; no lab engine is built without a decoder, and no "
        "graded function's contract says more than engine.text(...): a case could only test the given helper",
}

GAPS: dict[tuple[str, str], str] = {}
