"""Every grader proves itself against student-like code.

For each lab with graders:
  * the solution notebook (solutions/labNN) scores full marks on every test;
  * the release notebook (labs/labNN, stubs only) scores 0 on every test;
  * each autograder/variants/labNN/bug_*.py names in EXPECT_FAIL cases that exist.

Grading the variants takes minutes, so it is the end-to-end tier's (`make e2e`): `pytest
autograder/variants` grades each bug_*.py (it must fail every case its EXPECT_FAIL names,
a strict xfail each) and correct_*.py (full marks) inside the notebook a student would
submit, and autograder/tests/outcomes.py grades every variant's notebook in the sandboxed
standalone grader.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder import get_tests, labs, run_test
from autograder.notebook import extract, namespace, read
from autograder.variants import proving

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ROOT / "autograder" / "variants"


def _variant_files():
    out = []
    for lab in labs():
        for path in sorted((VARIANTS / lab).glob("*.py")):
            if path.name.startswith(("bug_", "correct_")):
                out.append(pytest.param(lab, path, id=f"{lab}/{path.stem}"))
    return out


def _notebook_ns(path: Path) -> dict:
    return namespace(extract(read(path)).code, str(path))


def _scores(lab, ns):
    return {name: run_test(test, ns) for name, test in get_tests(lab).items()}


def _notebooks(folder):
    return [pytest.param(lab, nb, id=f"{lab}/{nb.name}")
            for lab in labs() for nb in sorted((ROOT / folder / lab).glob("*.ipynb"))]


@pytest.mark.parametrize("lab,nb", _notebooks("solutions"))
def test_solution_notebook_scores_full_marks(lab, nb):
    for name, result in _scores(lab, _notebook_ns(nb)).items():
        failed = [f"{c.name}: {c.message}" for c in result.cases if not c.passed]
        assert not failed, f"{lab}/{name}: the reference solution fails {failed}"


@pytest.mark.parametrize("lab,nb", _notebooks("labs"))
def test_release_notebook_scores_zero(lab, nb):
    for name, result in _scores(lab, _notebook_ns(nb)).items():
        assert result.score == 0, f"{lab}/{name}: the unsolved release earns {result.score} points"


@pytest.mark.parametrize("lab,path", _variant_files())
def test_variant_names_real_cases(lab, path):
    """EXPECT_FAIL names collected cases (a bug variant at least one, a correct one none);
    grading each variant is `pytest autograder/variants`, part of `make e2e`."""
    cases = {name: [c.name for c in test.cases] for name, test in get_tests(lab).items()}
    wrong = proving.problems(path, cases)
    assert not wrong, f"{path.name}: {wrong}"


def test_every_lab_with_graders_has_variants():
    for lab in labs():
        files = [p.name for p in (VARIANTS / lab).glob("*.py")]
        assert any(f.startswith("bug_") for f in files), f"{lab} has no bug_*.py variants"
        assert any(f.startswith("correct_") for f in files), f"{lab} has no correct_*.py variant"


def test_test_cell_points_match_grader_points():
    """A notebook test cell's nbgrader points must equal the sum of its cases."""
    for lab in labs():
        tests = get_tests(lab)
        for nb_path in sorted((ROOT / "solutions" / lab).glob("*.ipynb")):
            nb = read(nb_path)
            cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
                     if c.metadata.get("nbgrader", {}).get("grade")}
            for name, test in tests.items():
                assert name in cells, f"{lab}: no graded cell has grade_id {name!r}"
                assert float(cells[name].metadata["nbgrader"]["points"]) == test.points, \
                    f"{lab}/{name}: cell points {cells[name].metadata['nbgrader']['points']} != grader {test.points}"


def test_patch_may_keep_the_solution_function_it_replaces():
    """`_old = f` in a patch lands in f's cell after the solution's code, before the new f."""
    from autograder.tests.submissions import from_source, solution_cells
    nb = from_source("lab03", 'BASE = "solution"\nEXPECT_FAIL = {}\n_solution_replay = replay\n\n\n'
                              "def replay(record):\n    return _solution_replay(record)\n")
    cells = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution_cells(nb)}
    src = cells["replay"]
    assert "_solution_replay" not in cells["validate_params"]
    assert src.index("### END SOLUTION") < src.index("_solution_replay = replay") \
        < src.index("return _solution_replay(record)")


def test_outcome_table_refuses_a_variant_whose_cell_raised():
    """The outcome table's guard recognises the grader's report of a cell that raised or
    did not parse, and not a problem with the notebook's form."""
    from autograder.isolation.driver import _cell_problem
    from autograder.tests.outcomes import _cell_broke
    raised = _cell_problem({"ok": False, "id": "spans_from_events",
                            "error": "NameError: name '__file__' is not defined"})
    syntax = _cell_problem({"ok": False, "id": "percentile", "kind": "syntax", "error": "invalid syntax"})
    assert _cell_broke(raised) and _cell_broke(syntax)
    assert not _cell_broke("the solution cell `percentile` is missing (deleted, or its metadata was changed)")
