"""check_logits(logits) -> None: the hidden cases of the cell logits_are_validated."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects
from autograder.core import Fail, describe
from autograder.reference import lab01 as ref

from .judging import case, value_error
from .probes import BAD_LOGITS, VALID_LOGITS, inputs

pytestmark = pytest.mark.cell("logits_are_validated", points=1,
                              description="check_logits accepts (..., V) float logits with +-inf; rejects the rest")


@pytest.mark.probe("check_valid")
@pytest.mark.cell(visible=True, hint="-inf (a removed token) and +inf are allowed; only NaN, all -inf rows and "
                                     "wrong types are errors.")
def test_valid_logits_pass(observation):
    """Valid logits, +-inf included, return None and stay unchanged."""
    for name in VALID_LOGITS:  # the reference accepts each of them too
        ref.check_logits(inputs(name))
    for name, o in observation.items():
        if o["out"] is not None:
            raise Fail(f"check_logits should return None for valid logits ({name})", expected=None,
                       got=describe(o["out"]), hint="Only raise on bad input; otherwise return nothing.")
        if not o["unchanged"]:
            raise Fail(f"check_logits changed the tensor it was given ({name})", hint="Only look at the input.")


@pytest.mark.parametrize("key", [
    case("nan_rejected", "nan", probe=("check_bad", "nan"), visible=True, fixture="nan_logits",
         hint="torch.isnan(logits).any() finds a NaN anywhere; raise ValueError naming `logits`."),
    case("all_masked_row_rejected", "all_masked", probe=("check_bad", "all_masked"), fixture="masked_logits",
         hint="torch.isneginf(logits).all(dim=-1).any(): a row with every token removed leaves nothing to choose."),
    case("wrong_type_rejected", "wrong_types", probe=("check_bad", "wrong_types"),
         hint="Require a floating-point torch.Tensor with at least one dimension and V >= 1 tokens."),
])
def test_bad_logits_rejected(observation, key):
    """NaN, an all -inf row and wrong types raise ValueError naming `logits`."""
    for (label, make), o in zip(BAD_LOGITS[key], observation):
        reference_rejects(ref.check_logits, (make(),), {}, f"check_logits on {label}")
        value_error(o["out"], "logits", f"check_logits on {label}")
