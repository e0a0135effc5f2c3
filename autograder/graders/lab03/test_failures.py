"""replay(record) and log_failures(specs, path): the hidden cases of the cell failures_are_logged_and_replayed."""
from __future__ import annotations

import pytest

import course
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab03 as ref

from .judging import case, label_of
from .probes import FAILURE_SPECS, REPLAYS

pytestmark = pytest.mark.cell("failures_are_logged_and_replayed", points=1,
                              description="log_failures saves every abnormal ending; replay reproduces it")


@pytest.mark.parametrize("key", [
    case("replay_reproduces_a_cancelled_run", "replay_reproduces_a_cancelled_run",
         probe=("replays", "replay_reproduces_a_cancelled_run"), visible=True, fixture="stop_string_3_tokens"),
    case("replay_handles_every_injection", "replay_handles_every_injection",
         probe=("replays", "replay_handles_every_injection"), points=2),
])
def test_replay(observation, key):
    """replay(spec) gives the run the spec describes: every injection and the seed used."""
    for spec, got in zip(REPLAYS[key], observation):
        exp = ref.expected_run(spec)
        r = got["result"]
        label = label_of(spec) + (f" seed={spec['seed']}" if spec.get("seed") is not None else "")
        if is_raised(r):
            raise Fail(f"{label}: replay raised {r['__raised__']}: {r['message']}",
                       hint="Build the model, clock, cancel token, filter and sampler from the spec alone.")
        for f in ("finish_reason", "tokens", "text", "raw_output"):
            if r[f] != exp[f]:
                raise Fail(f"{label}: replay gives the wrong `{f}`", expected=exp[f], got=r[f],
                           hint="Use every injection: raise_at, nan_at, cancel_at, seconds_per_call (with "
                                "deadline), banned_words, banned_token_ids; and seed -> seeded_sampler(seed).")


def _log_ok(obs):
    if obs["raised"] is not None:
        raise Fail(f"log_failures raised {obs['raised']['__raised__']}: {obs['raised']['message']}")
    if obs["bad_lines"]:
        raise Fail("the file is not JSON Lines (one JSON object per line)", got=obs["bad_lines"][0],
                   hint="Write json.dumps(record) + '\\n' for each record.")


def _abnormal():
    return [(s, ref.expected_run(s)) for s in FAILURE_SPECS if ref.expected_run(s)["finish_reason"] != "stop"]


@pytest.mark.probe("failure_log")
def test_only_abnormal_endings_are_logged(observation):
    """Exactly the runs that did not end with 'stop', in order."""
    _log_ok(observation)
    exp = [e["finish_reason"] for _, e in _abnormal()]
    got = [r.get("finish_reason") for r in observation["saved"]]
    if got != exp:
        raise Fail("the log should hold exactly the runs that did not end with 'stop', in order", expected=exp,
                   got=got, hint="Write a record for every finish_reason other than 'stop', and only for those.")


@pytest.mark.probe("failure_log")
def test_records_hold_what_replay_needs(observation):
    """Each record holds the whole spec and the outcome."""
    _log_ok(observation)
    for (spec, exp), rec in zip(_abnormal(), observation["saved"]):
        needed = ["fixture", "prompt_ids", "params", "seed", "inject", "tokens", "text", "raw_output", "finish_reason"]
        missing = [k for k in needed if k not in rec]
        if missing:
            raise Fail(f"a saved record lacks {missing}", expected=needed, got=sorted(rec),
                       hint="Save the whole spec (fixture, prompt_ids, params, seed, inject) plus the outcome.")
        fx = course.load_fixture(spec["fixture"])
        checks = {"fixture": (rec["fixture"], spec["fixture"]), "prompt_ids": (rec["prompt_ids"], list(fx.prompt_ids)),
                  "seed": (rec["seed"], spec["seed"]), "raw_output": (rec["raw_output"], exp["raw_output"]),
                  "tokens": (rec["tokens"], exp["tokens"]), "text": (rec["text"], exp["text"])}
        for key, (g, e) in checks.items():
            if g != e:
                raise Fail(f"record of {label_of(spec)}: wrong `{key}`", expected=e, got=g)
        for part in ("params", "inject"):
            have = rec[part] if isinstance(rec[part], dict) else {}
            for k, v in (spec.get(part) or {}).items():
                if have.get(k) != v:
                    raise Fail(f"record of {label_of(spec)}: `{part}` lost {k}={v!r}", got=rec[part],
                               hint="Copy every parameter and every injected failure into the record.")


@pytest.mark.probe("log_twice")
def test_saved_file_equals_returned_records(observation):
    """Two calls on one path append, and each returns the records it wrote."""
    _log_ok(observation)
    first, second = observation["returned"]
    if not first or not second:
        raise Fail("log_failures returned no records for runs that did not end with 'stop'",
                   got=[len(first), len(second)], hint="Return the list of the records you wrote, in order.")
    if observation["saved"] == second:
        raise Fail("a second call on the same path replaced the file instead of appending to it",
                   expected=f"{len(first) + len(second)} lines", got=f"{len(observation['saved'])} lines",
                   hint="Open the file in append mode ('a'): earlier failures must stay in the log.")
    if observation["saved"] != first + second:
        raise Fail("log_failures should return the records it wrote, equal to the file's lines (two calls: "
                   "the file holds the first call's records, then the second's)",
                   expected=describe(first + second), got=describe(observation["saved"]))


@pytest.mark.probe("failure_log")
@pytest.mark.cell(points=2)
def test_replaying_each_saved_failure_gives_the_same_result(observation):
    """replay(record read back from JSON) reproduces each saved failure."""
    _log_ok(observation)
    if not observation["saved"]:
        raise Fail("no failure was saved, so nothing could be replayed")
    for rec, again in zip(observation["saved"], observation["replays"]):
        if is_raised(again):
            raise Fail(f"replay of a saved {rec.get('finish_reason')} record raised {again['__raised__']}: "
                       f"{again['message']}", hint="replay(record) must work on a record read back from JSON.")
        for k in ("tokens", "text", "finish_reason"):
            if again[k] != rec.get(k):
                raise Fail(f"replaying a saved {rec.get('finish_reason')} record gives a different `{k}`",
                           expected=rec.get(k), got=again[k],
                           hint="Everything that shaped the run (seed, injections, deadline) must be in the record.")
