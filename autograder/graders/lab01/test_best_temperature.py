"""best_temperature_for_token(logits, token_id, temperatures): the hidden cases of the cell
best_temperature_is_found."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects
from autograder.core import Fail, describe
from autograder.reference import lab01 as ref

from .judging import case, value_error
from .probes import BAD_BEST, best_logits, inputs

pytestmark = pytest.mark.cell("best_temperature_is_found", points=1,
                              description="the most probability any listed temperature gives one token")

GRID = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0]
CANBERRA = 5     # ' Canberra' in answer_ranked_low (ranked 4th)
SYDNEY = 2       # the argmax of answer_ranked_low
THE_MASKED = 1   # ' the' in masked_logits is -inf


def judge_best(obs, input_name, token_id, temperatures, hint):
    got = obs["out"]
    if type(got) is not dict or set(got) != {"temperature", "probability"}:
        raise Fail('should return {"temperature": float, "probability": float}', got=describe(got), hint=hint)
    t, p = got["temperature"], got["probability"]
    if type(t) not in (float, int) or type(p) not in (float, int):
        raise Fail("the temperature and probability must be Python numbers", got=describe(got),
                   hint="Convert with float(...).")
    x = inputs(input_name)
    probs = [float(ref.softmax(ref.apply_temperature(x, tt))[token_id]) for tt in temperatures]
    best = max(probs)
    first_best = temperatures[probs.index(best)]
    # near-ties (within float noise) may go either way; exact ties go to the first in the list
    ok = [tt for i, tt in enumerate(temperatures)
          if probs[i] >= best - 1e-6 and probs.index(probs[i]) == i]
    if ref.best_temperature_for_token(x, token_id, list(temperatures))["temperature"] not in ok:
        raise Fail("grader error: the reference's choice is not among the best temperatures",
                   hint="This is a fault in the grader, not in your code: tell the course staff.")
    if t not in ok:
        raise Fail("picked the wrong temperature", expected=first_best, got=t, hint=hint)
    if abs(p - probs[temperatures.index(t)]) > 1e-5:
        raise Fail(f"wrong probability for the token at T = {t}", expected=probs[temperatures.index(t)],
                   got=p, hint="Return softmax(apply_temperature(logits, T))[token_id] at the chosen T.")
    if not obs["unchanged"]:
        raise Fail("changed the logits it was given", hint="Never modify the input in place.")


def row(name, input_name, token_id, hint, *, visible=False, as_tuple=False, also_token=None):
    return case(name, input_name, token_id, hint, also_token, visible=visible, fixture=input_name, hint=hint,
                probe=("best", input_name, token_id, GRID, as_tuple, also_token))


@pytest.mark.parametrize("input_name, token_id, hint, also_token", [
    row("low_ranked_answer", "answer_ranked_low", CANBERRA, "Try every temperature in the list: "
        "p = softmax(apply_temperature(logits, T))[token_id]; keep the largest (first on ties).", visible=True),
    row("argmax_token_best_at_zero", "answer_ranked_low", SYDNEY, "The argmax token gets probability 1 at T = 0; "
        "exact ties go to the first temperature in the list (given here as a tuple). Token id 0 is a valid id too.",
        as_tuple=True, also_token=0),
    row("masked_token_never_likely", "masked_logits", THE_MASKED, "A -inf token has probability 0 at every T: all "
        "tie, so return the first temperature in the list with probability 0.0."),
])
def test_best_temperature(observation, input_name, token_id, hint, also_token):
    """The first listed temperature that gives the token the most probability, and that probability."""
    if also_token is None:
        judge_best(observation, input_name, token_id, GRID, hint)
    else:
        judge_best(observation["main"], input_name, token_id, GRID, hint)
        judge_best(observation["also"], input_name, also_token, GRID, hint)


@pytest.mark.probe("bad_best")
@pytest.mark.cell(fixture="answer_ranked_low",
                  hint="Raise ValueError naming `token_id` (out of range), `temperatures` (empty) or `temperature` "
                       "(a bad value in the list; apply_temperature already checks it).")
def test_invalid_arguments_rejected(observation):
    """A token id out of range, an empty or non-list temperatures, a bad temperature or list logits raise."""
    for (param, args), o in zip(BAD_BEST, observation):
        call = f"best_temperature_for_token(logits, *{args!r})"
        reference_rejects(ref.best_temperature_for_token, (best_logits(param), *args), {}, call)
        value_error(o["out"], param, call)
