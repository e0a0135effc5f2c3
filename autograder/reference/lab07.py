"""Reference for lab07 (the serving engine): the judges' expected values.

The engine itself is course.engine.Engine (the course's answer to the lab); this
module adds the lab's other graded function, replay_in_engine. The Lab 03 failure
samples it replays are inputs, built by the grader (autograder/graders/lab07/_inputs.py).
"""
from __future__ import annotations

from course.batched import EngineConfig, RequestParams, ScriptedBatchedModel, SimulatedCost, solo_greedy  # noqa: F401
from course.clock import FakeClock
from course.engine import Engine, drain  # noqa: F401

def replay_in_engine(engine_cls, record):
    """Replay one saved Lab 03 record through an engine made by engine_cls.

    The fixture's logits are replayed by ScriptedBatchedModel.from_fixture (with the
    record's raise_at / nan_at); seconds_per_call becomes a SimulatedCost on a FakeClock
    the engine also reads; seed None is greedy (temperature 0), an int samples at
    temperature 1 with that seed; cancel_at aborts the request once it has that many
    tokens (0: before the first step). Returns {"tokens", "text" (the streamed deltas
    joined), "finish_reason" (wire name), "kv_blocks_used_after"} or None when the record
    needs a content filter (the engine has none).
    """
    inject = record.get("inject") or {}
    if inject.get("banned_words") or inject.get("banned_token_ids"):
        return None
    clock = FakeClock()
    model = ScriptedBatchedModel.from_fixture(record["fixture"], raise_at=inject.get("raise_at"),
                                              nan_at=inject.get("nan_at"))
    model = SimulatedCost(model, clock, fixed=float(inject.get("seconds_per_call") or 0.0), per_token=0.0)
    engine = engine_cls(model, None, EngineConfig(num_blocks=64, block_size=4), clock=clock)
    seed = record.get("seed")
    params = dict(record.get("params") or {}, temperature=0 if seed is None else 1.0, seed=seed)
    rid = engine.add_request(list(record["prompt_ids"]), RequestParams(**params))
    tokens, text, reason = [], "", None
    cancel_at = inject.get("cancel_at")
    if cancel_at == 0:
        engine.abort(rid)
        reason = "cancelled"
    while engine.has_unfinished():
        for out in engine.step():
            tokens += list(out.new_token_ids)
            text += out.text_delta
            if out.finish_reason is not None:
                reason = str(out.finish_reason)
        if reason is None and cancel_at is not None and len(tokens) >= cancel_at:
            engine.abort(rid)
            reason = "cancelled"
    return {"tokens": tokens, "text": text, "finish_reason": reason,
            "kv_blocks_used_after": engine.stats()["kv_blocks_used"]}
