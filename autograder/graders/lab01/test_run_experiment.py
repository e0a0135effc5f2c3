"""run_experiment(model, *, temperature, seed, max_tokens): the hidden cases of the cells
experiment_record_filled and sampling_is_seeded."""
from __future__ import annotations

import pytest

import course
from autograder.checks import reference_rejects
from autograder.core import Fail, describe
from autograder.reference import lab01 as ref

from .judging import case, value_error
from .probes import BAD_RUN_ARGS, SAMPLED

RECORD = pytest.mark.cell("experiment_record_filled",
                          description="run_experiment returns a filled ExperimentRecord with the right finish reason")
SEEDED = pytest.mark.cell("sampling_is_seeded", fixture="eos_or_length",
                          description="sampled runs use their own torch.Generator seeded by `seed`")

RECORD_HINT = ("One model call per token: logits = model(input_ids)[0]; append the token; stop when it is "
               "model.eos_token_id (`stop`) or when max_tokens tokens were made (`length`).")
SEED_HINT = ("Make one torch.Generator per run, gen = torch.Generator().manual_seed(seed), and pass it to every "
             "draw: torch.multinomial(probs, 1, generator=gen). Never use or reseed the global RNG.")


def _check_tokens_plain(tokens):
    if type(tokens) is not list or not all(type(t) is int for t in tokens):
        raise Fail("`tokens` must be a list of Python ints", expected="list[int]", got=describe(tokens),
                   hint="Append int(token) for each generated token, not a tensor.")


def run(name, fixture, temperature, seed, max_tokens, *, visible=False, hint=RECORD_HINT):
    return case(name, fixture, {"temperature": temperature, "seed": seed, "max_tokens": max_tokens},
                probe=("experiment", fixture, temperature, seed, max_tokens), visible=visible, fixture=fixture,
                hint=hint)


@RECORD
@pytest.mark.parametrize("fixture, kwargs", [
    run("greedy_stops_on_eos", "eos_at_step_3", 0.0, None, 8, visible=True),
    run("length_when_max_tokens_reached", "eos_at_step_3", 0.0, None, 1,
        hint="Stop after max_tokens tokens with finish_reason `length`; call the model no more."),
    run("eos_on_last_allowed_token_is_stop", "eos_at_step_3", 0.0, None, 4,
        hint="EOS as the last allowed token is still `stop`: check EOS before max_tokens."),
    run("greedy_records_no_seed", "eos_or_length", 0, 5, 6,
        hint="At T == 0 the run is greedy and needs no seed: record seed=None."),
    run("sampled_record_fields", "eos_or_length", 0.8, 3, 6),
    run("sampled_run_cut_by_max_tokens", "eos_or_length", 1.5, 1, 3),
])
def test_record(observation, fixture, kwargs):
    """The record's fixture, params, seed, tokens, finish reason and text match the reference run."""
    obs = observation
    if not obs["is_record"]:
        raise Fail("run_experiment should return a course.ExperimentRecord", expected="ExperimentRecord",
                   got=obs["type"], hint="Build and return course.ExperimentRecord(fixture=..., params=..., "
                   "seed=..., tokens=..., text=..., finish_reason=...).")
    got, exp = obs["record"], ref.run_experiment(course.ScriptedModel(fixture), **kwargs).to_dict()
    if got["fixture"] != exp["fixture"]:
        raise Fail("the record names the wrong fixture", expected=exp["fixture"], got=got["fixture"],
                   hint="Use the model's fixture name: model.fixture.name.")
    if set(got["params"]) != set(exp["params"]):
        raise Fail("`params` must hold exactly the keys temperature and max_tokens",
                   expected=sorted(exp["params"]), got=sorted(got["params"]),
                   hint='params={"temperature": float(temperature), "max_tokens": max_tokens}')
    for k in exp["params"]:
        if got["params"][k] != exp["params"][k] or type(got["params"][k]) not in (int, float):
            raise Fail(f"params[{k!r}] is wrong", expected=exp["params"][k], got=got["params"][k],
                       hint="Record the parameters the run used, as plain numbers.")
    if got["seed"] != exp["seed"] or type(got["seed"]) is not type(exp["seed"]):
        raise Fail("`seed` is wrong", expected=exp["seed"], got=got["seed"],
                   hint="Record the seed of a sampled run; a greedy run (T == 0) uses no seed: record None.")
    _check_tokens_plain(got["tokens"])
    if got["tokens"] != exp["tokens"]:
        raise Fail("generated the wrong tokens", expected=exp["tokens"], got=got["tokens"],
                   hint="Greedy: the argmax each step. Sampled: torch.multinomial(probs, 1, generator=gen) "
                   "with gen = torch.Generator().manual_seed(seed), made once per run.")
    if got["finish_reason"] != exp["finish_reason"]:
        raise Fail("wrong finish_reason", expected=exp["finish_reason"], got=got["finish_reason"],
                   hint="`stop` when the last token is EOS (including EOS on the last allowed token), "
                   "`length` when max_tokens tokens were generated without EOS.")
    if got["text"] != exp["text"]:
        raise Fail("wrong `text`", expected=exp["text"], got=got["text"],
                   hint="text = model.decode(tokens) without the EOS token, when the run stopped on EOS.")


@RECORD
@pytest.mark.probe("bad_run_args")
@pytest.mark.cell(fixture="eos_at_step_3",
                  hint="Validate up front: max_tokens an int >= 1, seed an int when temperature > 0, temperature as "
                       "in apply_temperature; raise ValueError naming the parameter.")
def test_invalid_arguments_rejected(observation):
    """A bad max_tokens, seed or temperature raises ValueError naming the parameter."""
    for (param, kwargs), o in zip(BAD_RUN_ARGS, observation):
        call = f"run_experiment(model, **{kwargs!r})"
        reference_rejects(ref.run_experiment, (course.ScriptedModel("eos_at_step_3"),), kwargs, call)
        value_error(o["out"], param, call)


# ---------------------------------------------------------------- seeded sampling

def _not_records(*runs):
    for r in runs:
        if isinstance(r, dict):
            raise Fail("run_experiment should return a course.ExperimentRecord", got=r["not_a_record"])
        _check_tokens_plain(r)


@SEEDED
@pytest.mark.probe("sampling", "same_seed")
@pytest.mark.cell(hint=SEED_HINT, visible=True)
def test_same_seed_same_tokens(observation):
    """Two runs with seed=7 give the same tokens, whatever the global seed."""
    _not_records(observation["first"], observation["second"])
    if observation["first"] != observation["second"]:
        raise Fail("two runs with the same seed gave different tokens", expected=observation["first"],
                   got=observation["second"], hint=SEED_HINT)


@SEEDED
@pytest.mark.probe("sampling", "global_seed")
@pytest.mark.cell(hint=SEED_HINT)
def test_global_seed_does_not_matter(observation):
    """torch.manual_seed does not change the tokens of a run with its own seed."""
    _not_records(*observation)
    if any(t != observation[0] for t in observation):
        raise Fail("changing the global seed (torch.manual_seed) changed the tokens of a run with seed=7",
                   expected=observation[0], got=next(t for t in observation if t != observation[0]), hint=SEED_HINT)


@SEEDED
@pytest.mark.probe("sampling", "rng_untouched")
@pytest.mark.cell(hint=SEED_HINT)
def test_global_rng_untouched(observation):
    """A run neither uses nor changes the global RNG state."""
    if not observation["untouched"]:
        raise Fail("run_experiment changed the global RNG state", hint=SEED_HINT)


@SEEDED
@pytest.mark.probe("sampling", "recipe")
@pytest.mark.cell(hint=SEED_HINT)
def test_matches_documented_sampler(observation):
    """Seeds 0-5 give the tokens of the documented recipe."""
    for s, got in observation.items():
        _not_records(got)
        exp = ref.run_experiment(course.ScriptedModel("eos_or_length"), seed=int(s), **SAMPLED).tokens
        if got != exp:
            raise Fail(f"seed={s} gave different tokens from the documented sampler", expected=exp, got=got,
                       hint="Sample softmax(apply_temperature(logits, T)) with torch.multinomial(probs, 1, "
                       "generator=gen), gen = torch.Generator().manual_seed(seed) made once per run, one draw "
                       "per step, no other draws from gen.")


@SEEDED
@pytest.mark.probe("sampling", "seeds_differ")
@pytest.mark.cell(hint=SEED_HINT)
def test_different_seeds_differ(observation):
    """Eight seeds do not all give the same tokens at T = 1.5."""
    _not_records(*observation)
    if len({tuple(t) for t in observation}) < 2:
        raise Fail("eight different seeds all gave the same tokens at T = 1.5", got=observation[0],
                   hint="Seed the generator with the `seed` argument, not a constant.")
