"""entropy(probs) -> (...,) in nats: the hidden cases of the cell entropy_in_nats."""
from __future__ import annotations

import math

import pytest
import torch

from autograder.checks import reference_rejects
from autograder.core import Fail
from autograder.reference import lab01 as ref

from .judging import case, compare, got_tensor, unchanged, value_error
from .probes import BAD_PROBS, inputs

pytestmark = pytest.mark.cell("entropy_in_nats", points=1,
                              description="entropy in nats over the last dim, 0 log 0 = 0, inputs validated")

ENTROPY_NATS = "Entropy is in nats: use the natural log (torch.log). log2 gives bits (ln 8 = 2.079 nats = 3 bits)."
ENTROPY_ZERO = ("0 * log(0) is NaN in floating point, but its limit is 0: only sum p * log(p) over entries "
                "with p > 0 (torch.where, or torch.special.entr).")


def row(name, input_name, hint, *, visible=False, fixture=None):
    return case(name, input_name, hint, probe=("call", "entropy", input_name), visible=visible, fixture=fixture,
                hint=hint)


@pytest.mark.parametrize("input_name, hint", [
    row("uniform_is_log_v", "uniform_probs", ENTROPY_NATS, visible=True, fixture="uniform_row"),
    row("peaked_matches_reference", "peaked_probs", "H(p) = -sum_i p_i log p_i over the last dimension.",
        visible=True, fixture="peaked"),
    row("one_hot_is_zero", "one_hot_probs", ENTROPY_ZERO),
    row("zeros_from_masked_tokens", "masked_probs", ENTROPY_ZERO, fixture="masked_logits"),
    row("batch_shape_2_3", "batch_probs", "Sum over the last dimension only: (2, 3, V) probabilities give a (2, 3) "
        "entropy."),
    row("sum_within_tolerance_accepted", "slightly_off_probs", "Rows may sum to 1 within 1e-4 (float rounding); "
        "only reject larger errors."),
])
def test_entropy_values(observation, input_name, hint):
    """H(p) = -sum p log p in nats over the last dimension, with 0 log 0 = 0."""
    got = got_tensor(observation["out"], "entropy", "float32", hint)
    expected = ref.entropy(inputs(input_name))
    if torch.isnan(got).any():
        raise Fail("entropy returned NaN", expected="no NaN", got=f"{int(torch.isnan(got).sum())} NaN entries",
                   hint=ENTROPY_ZERO)
    try:
        compare(got, expected, what="entropy", hint=hint, atol=1e-5)
    except Fail as f:
        if got.shape == expected.shape and torch.allclose(got.double(), expected.double() / math.log(2), atol=1e-4):
            raise Fail(f.message + " (your value is the entropy in bits)", expected=f.expected, got=f.got,
                       hint=ENTROPY_NATS) from None
        raise
    unchanged(observation)


@pytest.mark.probe("bad_probs")
@pytest.mark.cell(hint="Raise ValueError naming `probs` for negative entries, NaN, or rows not summing to 1 "
                       "within 1e-4.")
def test_invalid_probs_rejected(observation):
    """Negative entries, NaN, rows not summing to 1 and lists raise ValueError naming `probs`."""
    for (label, make), o in zip(BAD_PROBS, observation):
        reference_rejects(ref.entropy, (make(),), {}, f"entropy of probabilities with {label}")
        value_error(o["out"], "probs", f"entropy of probabilities with {label}")
