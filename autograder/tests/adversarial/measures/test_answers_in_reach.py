"""Neither the course's own answers nor the grader's expected values earn lab05 points.

lab05_answer_wrapper.py wraps kv_bytes_per_token and requests_that_fit around the course's
answers (course.kv_cache's forwarded attribute, course.paged_kv, paged_kv.py's source);
lab05_stack_judge.py asks every frame above it and every function the heap lists for an
expected value. Graded in the real sandboxed child on the tests of those two cells, each
scores no more than the unsolved release, and its output shows that it tried and found
nothing (the file's EXPECT). e2e/test_adversarial_user.py runs the same files as an
ordinary user, through `python -m autograder grade`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.tests import adversarial

HERE = Path(__file__).resolve().parent
ATTACKS = ("lab05_answer_wrapper", "lab05_stack_judge")
TESTS = ("kv_bytes_per_token_counts_kv_heads", "capacity_planning_counts_whole_blocks")


@pytest.mark.slow
def test_answers_in_reach_score_no_more_than_the_release(tmp_path):
    from autograder.core import get_tests
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    from autograder.tests.submissions import from_source, release, write
    tests = [get_tests("lab05")[n] for n in TESTS]
    limits = Limits(timeout=300, test_timeout=120, case_timeout=60)
    nbs = {"release": write(release("lab05"), tmp_path / "release.ipynb")}
    for name in ATTACKS:
        nbs[name] = write(from_source("lab05", (HERE / f"{name}.py").read_text(encoding="utf-8")),
                          tmp_path / f"{name}.ipynb")
    with Runtime("lab05") as rt:
        got = {name: grade_isolated(prepare(nb, "lab05"), rt, tests=tests, limits=limits) for name, nb in nbs.items()}
    stub = {t.name: t.score for t in got["release"].tests}
    for name in ATTACKS:
        g, exp = got[name], adversarial.expectations(HERE / f"{name}.py")
        assert exp["no_more_than"] == "release" and not g.harness_error, g.problems
        scores = {t.name: t.score for t in g.tests}
        assert all(scores[n] <= stub[n] for n in TESTS), f"{name}: {scores} (the release: {stub})"
        for s in exp["output_has"]:
            assert s in g.output, f"{name}: the attack did not run as planned (no {s!r})\n{g.output[-2000:]}"
        for s in exp["output_not"]:
            assert s not in g.output, f"{name}: {s!r} appeared\n{g.output[-3000:]}"
