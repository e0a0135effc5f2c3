"""Every case of the labs in the outcome table (autograder/tests/outcomes.py) gives every
variant, release, solution and adversarial notebook the verdict it had when the table was
written: the standalone grader, run over all of them, one lab at a time. Rewrite the table
(`python -m autograder.tests.outcomes LAB`) only when a verdict is meant to change."""
from __future__ import annotations

import pytest

from autograder.tests import outcomes


@pytest.mark.parametrize("lab", outcomes.LABS)
def test_verdicts_are_unchanged(lab):
    diff = outcomes.differences(outcomes.load(), outcomes.compute((lab,)), (lab,))
    assert not diff, "verdicts changed:\n" + "\n".join(diff[:40])
