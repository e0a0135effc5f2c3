"""A lie about the pool earns nothing: each leak_lying_* submission scores no more than the
same leak told truthfully (lab05_leak, lab07_leak), and less than full marks, in the real
sandboxed child.

lab05: a leaking run_request with an allocator whose num_free/num_used count the leaked
blocks as free (the grader counts blocks with its own Ledger). lab07: a late release with
the course allocator's num_free/num_used properties replaced (the tamper watch checks
properties; the grader counts blocks with its own Ledger)."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

CASES = {
    "lab05": ("lab05_leak", "lab05_leak_lying_allocator", ["run_request_releases_on_every_ending"]),
    "lab07": ("lab07_leak", "lab07_leak_lying_property", ["every_ending_frees_its_blocks", "abort_frees_blocks_now"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(CASES))
def test_a_lie_about_the_pool_scores_no_more_than_the_leak(lab, tmp_path):
    from autograder.core import get_tests
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    from autograder.tests.submissions import from_source, write
    leak, lying, names = CASES[lab]
    tests = [get_tests(lab)[n] for n in names]
    scores = {}
    with Runtime(lab) as rt:
        for name in (leak, lying):
            nb = write(from_source(lab, (HERE / f"{name}.py").read_text(encoding="utf-8")), tmp_path / f"{name}.ipynb")
            g = grade_isolated(prepare(nb, lab), rt, tests=tests,
                               limits=Limits(timeout=600, test_timeout=300, case_timeout=120))
            assert not g.harness_error and not [p for p in g.problems if "raised" in p], g.problems
            scores[name] = {t.name: t.score for t in g.tests}
    full = {t.name: t.points for t in tests}
    for n in names:
        assert scores[lying][n] <= scores[leak][n] < full[n], scores
