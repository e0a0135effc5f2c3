"""greedy_token_ids(logits) -> LongTensor: the hidden cases of the cell greedy_token_ids_break_ties_low."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects
from autograder.reference import lab01 as ref

from .judging import case, compare, got_tensor, unchanged, value_error
from .probes import inputs

pytestmark = pytest.mark.cell("greedy_token_ids_break_ties_low", points=1,
                              description="greedy_token_ids: argmax over the last dim, lowest id on ties")


def row(name, input_name, hint, *, visible=False, fixture=None):
    return case(name, input_name, hint, probe=("call", "greedy_token_ids", input_name), visible=visible,
                fixture=fixture or input_name, hint=hint)


@pytest.mark.parametrize("input_name, hint", [
    row("peaked_argmax", "peaked", "The greedy id is the index of the largest logit (torch.argmax over dim=-1).",
        visible=True),
    row("exact_tie_goes_to_lowest_id", "ties", "Two logits are equal; the contract says the lowest id wins "
        "(torch.argmax returns the first maximum)."),
    case("batch_shape_2_3_v", "batch_2_3_v", "Take the argmax over the last dimension only: (2, 3, V) logits give "
         "a (2, 3) LongTensor.", probe=("call", "greedy_token_ids", "batch_2_3_v"),
         hint="Take the argmax over the last dimension only: (2, 3, V) logits give a (2, 3) LongTensor."),
    row("pos_inf_rows", "pos_inf_rows", "+inf is the largest value; with two, the lower id wins.",
        fixture="pos_inf_logit"),
])
def test_greedy_ids(observation, input_name, hint):
    """The argmax over the last dimension, as int64 ids, lowest id on ties."""
    got = got_tensor(observation["out"], "greedy_token_ids", "int64", hint)
    expected = ref.greedy_token_ids(inputs(input_name))
    compare(got, expected, what="greedy_token_ids", hint=hint, atol=0, rtol=0)
    unchanged(observation)


@pytest.mark.probe("call_expecting_error", "greedy_token_ids", "nan_in_batch")
@pytest.mark.cell(fixture="nan_logits",
                  hint="torch.argmax treats NaN as the maximum: check torch.isnan(logits).any() first.")
def test_nan_rejected(observation):
    """A NaN anywhere raises ValueError naming `logits`."""
    reference_rejects(ref.greedy_token_ids, (inputs("nan_in_batch"),), {}, "greedy_token_ids on logits with a NaN")
    for o in observation:
        value_error(o["out"], "logits", "greedy_token_ids on logits with a NaN")
