"""replay_in_engine samples a seeded record at temperature 0.5 (to play safe) instead of 1.0."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'failure_samples_replay_through_the_engine': ['replays_another_seed_at_temperature_1']}


def replay_in_engine(engine_cls, record):
    inject = record.get("inject") or {}
    if inject.get("banned_words") or inject.get("banned_token_ids"):
        return None
    fake_clock = FakeClock()
    model = ScriptedBatchedModel.from_fixture(record["fixture"], raise_at=inject.get("raise_at"),
                                              nan_at=inject.get("nan_at"))
    model = SimulatedCost(model, fake_clock, fixed=float(inject.get("seconds_per_call") or 0.0), per_token=0.0)
    engine = engine_cls(model, None, EngineConfig(num_blocks=64, block_size=4), clock=fake_clock)
    seed = record.get("seed")
    params = dict(record.get("params") or {}, temperature=0 if seed is None else 0.5,   # BUG: 0.5, not 1.0
                  seed=seed)
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
