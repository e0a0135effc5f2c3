"""lab00's probes: they run in the student's process and return plain data. No reference here.

A probe is a public function whose first parameter is `ns` (the student's namespace); the
tests name it in @pytest.mark.probe("greedy_token", "peaked") with plain arguments.
"""
from __future__ import annotations

import torch

import course

from autograder.checks import record
from autograder.core import function


def logits(name: str) -> torch.Tensor:
    """The input a case gives greedy_token: the first logit row of fixture `name`, (V,); for
    "batch", the rows of 'peaked' and 'flat' stacked, (2, V)."""
    if name == "batch":
        return torch.stack([course.fixtures.load("peaked").logits(0), course.fixtures.load("flat").logits(0)])
    return course.fixtures.load(name).logits(0)


def label(name: str) -> str:
    """How messages name that input."""
    return "a (2, V) batch" if name == "batch" else f"fixture {name!r}"


def greedy_token(ns, name: str) -> dict:
    """greedy_token(logits(name)), recorded (checks.record); a 0-d tensor counts as its number."""
    rec = record(function(ns, "greedy_token"), (logits(name),))
    out = rec["result"]
    if hasattr(out, "item") and getattr(out, "dim", lambda: 1)() == 0:
        rec["result"] = out.item()  # a 0-d tensor is an acceptable answer
    return rec
