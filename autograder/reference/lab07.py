"""Reference for lab07 (the serving engine): the judges' expected values.

The engine itself is course.engine.Engine (the course's answer to the lab); this
module adds the lab's other graded function, replay_in_engine, and the Lab 03
failure samples it replays.
"""
from __future__ import annotations

from course.acceptance import failure_record, run_spec
from course.batched import EngineConfig, RequestParams, ScriptedBatchedModel, SimulatedCost, solo_greedy  # noqa: F401
from course.clock import FakeClock
from course.engine import Engine, drain  # noqa: F401
from course.finish import FinishReason

# The runs Lab 03's failure log demo makes; the abnormal ones are its saved samples.
LAB03_SPECS = (
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}},
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 2}},
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "stop": ["\nUser:"]}, "inject": {"cancel_at": 7}},
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "deadline": 0.5},
     "inject": {"seconds_per_call": 0.2}},
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}, "inject": {"raise_at": 2}},
    {"fixture": "content_filter_banned_word", "params": {"max_tokens": 16}, "inject": {"banned_words": ["swordfish"]}},
    {"fixture": "sampled_coin_flips", "params": {"max_tokens": 6}, "seed": 3},
)


def failure_samples(specs=LAB03_SPECS) -> list[dict]:
    """The records Lab 03's log_failures writes for `specs`: every run not ending in `stop`."""
    out = []
    for spec in specs:
        result = run_spec(spec)
        if result.finish_reason is not FinishReason.STOP:
            out.append(failure_record(spec, result))
    return out


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
