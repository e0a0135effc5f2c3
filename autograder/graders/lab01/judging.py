"""Judging helpers shared by lab01's tests (grading process only: they use the reference)."""
from __future__ import annotations

import pytest

from autograder.checks import close, rejects, result_of
from autograder.core import Fail, as_tensor, describe, is_tensor

from .probes import inputs


def got_tensor(got, what, dtype, hint):
    """The observed result as a tensor of `dtype`, or a Fail saying what it was instead."""
    got = result_of({"result": got}, what, hint)
    if not is_tensor(got):
        raise Fail(f"{what} should return a torch tensor", expected="torch.Tensor", got=describe(got),
                   hint="Return a tensor built from the input with torch operations.")
    if got["dtype"] != dtype:
        raise Fail(f"{what} returned dtype {got['dtype']}, expected {dtype}", expected=dtype, got=got["dtype"],
                   hint="Keep the dtype of the input (float32 logits give float32 results)."
                   if dtype.startswith("float") else "torch.argmax returns int64 (torch.long) ids; return those.")
    return as_tensor(got, what)


def compare(got, expected, *, what, hint, atol=1e-6, rtol=1e-5):
    """checks.close, with a hint about the last dimension when the shape is wrong."""
    if tuple(got.shape) != tuple(expected.shape) and "shape" not in (hint or ""):
        hint = "Work over the last dimension (dim=-1, keepdim=True) so any batch shape (..., V) works."
    close(got, expected, atol=atol, rtol=rtol, what=what, hint=hint)


def unchanged(obs):
    if not obs["unchanged"]:
        raise Fail("changed the tensor it was given", hint="Never modify the input in place (no `x -= ...`, "
                   "no `.div_()`); build a new tensor.")


def value_error(got, param, what):
    """got must be a raised ValueError whose message names `param` (the lab01 contract
    asks for the name; only apply_temperature's also asks for the value)."""
    rejects({"result": got}, what, param, None, show_value=False)


def case(name, *values, probe, visible=False, fixture=None, hint=None):
    """One row of a case table: `values` for the test's parameters, the probe call
    (name, *plain args), and the report fields of the case."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, fixture=fixture, hint=hint)])


__all__ = ["got_tensor", "compare", "unchanged", "value_error", "case", "inputs"]
