"""Replays every record greedily: fine for greedy runs, but a sampled run (seed 3) comes
back with different tokens, so the saved failure cannot be reproduced."""
import threading

import torch

import course
from course import FakeClock, ScriptedModel
from course.runs import InjectedModel
from course.runs import greedy_sampler

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"failures_are_logged_and_replayed": ["replay_handles_every_injection",
                                                    "records_hold_what_replay_needs"]}


def replay(record):
    fx = course.load_fixture(record["fixture"])
    inj = record.get("inject") or {}
    clock, cancel = FakeClock(), threading.Event()
    model = InjectedModel(ScriptedModel(fx, raise_at=inj.get("raise_at"), nan_at=inj.get("nan_at")),
                          prompt_len=len(fx.prompt_ids), cancel=cancel, cancel_at=inj.get("cancel_at"), clock=clock,
                          seconds_per_call=inj.get("seconds_per_call") or 0.0)
    words, ids = inj.get("banned_words") or [], inj.get("banned_token_ids") or []
    filt = (lambda t, text: t in ids or any(w in text for w in words)) if (words or ids) else None
    prompt = record.get("prompt_ids") or list(fx.prompt_ids)
    return generate(model, torch.tensor([prompt]), **record.get("params", {}),
                    sampler=greedy_sampler,   # BUG: always greedy, the record's seed is ignored
                    cancel=cancel, clock=clock, content_filter=filt)
