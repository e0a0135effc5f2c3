"""greedy_token(logits) -> int: the hidden cases of the cell greedy_token_picks_argmax."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects, rejects, result_of, unchanged
from autograder.core import Fail
from autograder.reference import lab00 as ref

from .probes import label, logits

pytestmark = pytest.mark.cell("greedy_token_picks_argmax", points=1,
                              description="greedy_token returns the id of the largest logit")


def case(name: str, fixture: str, hint: str, *, visible: bool = False):
    """One row of a case table: the probe greedy_token on `fixture`, named `name`."""
    return pytest.param(fixture, hint, id=name, marks=[pytest.mark.probe("greedy_token", fixture),
                                                       pytest.mark.cell(fixture=fixture, visible=visible)])


@pytest.mark.parametrize("fixture, hint", [
    case("peaked_distribution", "peaked", "The greedy token is the index of the largest logit.", visible=True),
    case("exact_tie_goes_to_lowest_id", "ties", "Two logits are equal; the contract says the lowest id wins."),
    case("masked_tokens_ignored", "masked_logits", "-inf marks a removed token; it can never be the argmax."),
    case("extreme_logits", "extreme_logits", "Compare logits directly; no exp() is needed to find a maximum."),
])
def test_picks_the_largest_logit(observation, fixture, hint):
    """greedy_token returns the id of the largest logit, as a Python int, and leaves its input alone."""
    call = f"greedy_token(<{label(fixture)}>)"
    expected = ref.greedy_token(logits(fixture))
    got = result_of(observation, call, hint, expected=expected)
    if type(got) is not int:
        raise Fail(f"{call} should return a Python int (use int(...) or .item())",
                   expected="int", got=type(got).__name__, hint=hint)
    assert got == expected, hint
    unchanged(observation, call)


@pytest.mark.parametrize("fixture, hint", [
    case("nan_rejected", "nan_logits",
         "Check torch.isnan(logits).any() first and raise ValueError with a message naming `logits`."),
    pytest.param("batch", "The contract takes one row (V,): check logits.dim() == 1 and raise ValueError "
                          "naming `logits` and showing its shape.", id="non_1d_rejected",
                 marks=[pytest.mark.probe("greedy_token", "batch"), pytest.mark.cell(fixture="peaked")]),
])
def test_rejects_what_has_no_argmax(observation, fixture, hint):
    """NaN logits and a batch are refused with a ValueError naming `logits`."""
    call = f"greedy_token(<{label(fixture)}>)"
    reference_rejects(ref.greedy_token, (logits(fixture),), {}, call)
    rejects(observation, call, "logits", logits(fixture), hint)
