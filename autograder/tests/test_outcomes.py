"""The outcome table (autograder/tests/outcomes.py) still holds: every case of labs 00-04
gives every variant, release, solution and adversarial notebook the verdict it had when
the table was written. Rewrite the table (`python -m autograder.tests.outcomes LAB`) only
when a verdict is meant to change, and say why in the commit. Recomputing every verdict takes
minutes, so it runs with the end-to-end tier (e2e/test_outcome_table.py); here only the
table's coverage is checked."""
from __future__ import annotations

from autograder.core import get_tests
from autograder.tests import outcomes


def test_the_table_covers_every_submission_and_case():
    table = outcomes.load()
    for lab in outcomes.LABS:
        names = {k.split("/", 1)[1] for k in table if k.startswith(lab + "/")}
        variants = {p.stem for p in (outcomes.VARIANTS / lab).glob("*.py") if p.name.startswith(("bug_", "correct_"))}
        assert variants | {"release", "solution"} <= names, f"{lab}: rows missing from the outcome table"
        cases = {f"{name}/{c.name}" for name, t in get_tests(lab).items() for c in t.cases}
        assert set(table[f"{lab}/solution"]) == cases, f"{lab}: the table's cases are not the grader's"
