"""lab07's Lab 03 samples, inputs built in the student's process (sent to the sandboxed child with
the probes): the saved samples of Lab 03's failure-log demo, and records built from them for the
clauses the saved ones leave out. No reference here."""
from __future__ import annotations

import copy
from functools import lru_cache

# The runs of Lab 03's failure-log demo; the abnormal ones are its saved samples (inputs,
# built from course.acceptance in whichever process needs them).
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


@lru_cache(maxsize=1)
def _samples():
    from course.acceptance import failure_record, run_spec
    from course.finish import FinishReason
    runs = [(spec, run_spec(spec)) for spec in LAB03_SPECS]
    return tuple(failure_record(spec, r) for spec, r in runs if r.finish_reason is not FinishReason.STOP)


def replay_record(kind):
    """A record built from a saved sample, for the clauses the saved ones leave out:
    cancel_at_0 (the length sample, cancelled before its first step), nan (the error sample
    with NaN logits instead of the exception), banned_token_ids (a filter by ids only),
    greedy_coin_flips (the sampled sample with seed None: greedy), other_seed (seed 4, where
    temperature 1.0 and 2.0 draw differently),
    no_cost (the timeout sample without seconds_per_call: forwards take no time)."""
    if kind == "cancel_at_0":
        r = sample("length")
        r["inject"] = dict(r.get("inject") or {}, cancel_at=0)
    elif kind == "nan":
        r = sample("error")
        inject = dict(r["inject"])
        inject["nan_at"] = inject.pop("raise_at")
        r["inject"] = inject
    elif kind == "banned_token_ids":
        r = sample("content_filter")
        r["inject"] = {"banned_token_ids": [int(r["tokens"][-1])] if r.get("tokens") else [0]}
    elif kind == "greedy_coin_flips":
        r = sample("length", seeded=True)
        r["seed"] = None
    elif kind == "other_seed":
        r = sample("length", seeded=True)
        r["seed"] = 4
    elif kind == "no_cost":
        r = sample("timeout")
        r["inject"] = {k: v for k, v in r["inject"].items() if k != "seconds_per_call"}
    else:
        raise KeyError(kind)
    return r


def sample(reason, seeded=False):
    """A fresh copy of the saved Lab 03 sample that ended with `reason` (seeded: the sampled one)."""
    for s in _samples():
        if s["finish_reason"] == reason and (s.get("seed") is not None) == seeded:
            return copy.deepcopy(s)
    raise KeyError(reason)
