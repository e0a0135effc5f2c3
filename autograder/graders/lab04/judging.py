"""Judging helpers shared by lab04's tests (grading process only: they use the reference)."""
from __future__ import annotations

import pytest

from autograder.core import Fail


def token_list(got, what="the result"):
    if not isinstance(got, list) or not all(type(t) is int for t in got):
        raise Fail(f"{what} should be a list of Python ints (token ids)", expected="list[int]",
                   got=got, hint="Collect `int(token)` for each new token in a plain list.")
    return got


def close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and b is not None \
        and abs(a - b) <= 1e-9 + 1e-9 * abs(b)


def no_calls(rec, call, param):
    if rec.get("events"):
        raise Fail(f"{call} called the model before rejecting `{param}`", expected=[], got=rec["events"],
                   hint="Validate every argument first, before any prefill, decode or forward call.")


def case(name, *values, probe, visible=False, points=1):
    """One row of a case table: `values` for the test's parameters and the probe call (name, *plain args)."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, points=points)])
