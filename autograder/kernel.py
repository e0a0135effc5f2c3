"""The in-kernel harness, called from nbgrader test cells.

    check("lab01", "softmax_is_stable", globals())   # visible cases: a report
    grade("lab01", "softmax_is_stable", globals())   # every case: points, as the
                                                     # cell's value (nbgrader partial credit)

Both print a report and never raise, so one failing exercise cannot stop the
rest of the notebook from being graded. Anything the student's code writes to
stderr is captured: nbgrader gives zero to a test cell with stderr output.
"""
from __future__ import annotations

import contextlib
import io
import warnings

from .core import get_tests, run_test
from .reports import test_text


class CheckSummary:
    """What check() returns; its repr is the one line a learner sees last."""

    def __init__(self, result):
        self.result = result
        self.passed = sum(c.passed for c in result.cases)
        self.total = len(result.cases)

    @property
    def all_passed(self) -> bool:
        return self.passed == self.total

    def __repr__(self) -> str:
        verdict = "all passed" if self.all_passed else "keep going"
        return f"{self.result.name}: {self.passed}/{self.total} visible checks passed ({verdict})"


def _run(lab, name, ns, visible_only):
    test = get_tests(lab).get(name)
    if test is None:
        raise ValueError(f"`name` must be a test of {lab}: {', '.join(get_tests(lab))}; got {name!r}.")
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        return run_test(test, ns, visible_only=visible_only)


def check(lab: str, name: str, ns: dict) -> CheckSummary:
    """Run the visible cases of one test and print what passed and what to fix."""
    result = _run(lab, name, ns, visible_only=True)
    print(test_text(result, title=f"{name}: visible checks"))
    return CheckSummary(result)


def grade(lab: str, name: str, ns: dict) -> float:
    """Run every case of one test; print the report; return the points earned."""
    result = _run(lab, name, ns, visible_only=False)
    print(test_text(result))
    return float(result.score)
