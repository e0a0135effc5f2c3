"""Every grader proves itself against student-like code.

For each lab with graders:
  * the solution notebook (solutions/labNN) scores full marks on every test;
  * the release notebook (labs/labNN, stubs only) scores 0 on every test;
  * each autograder/variants/labNN/bug_*.py fails every case its EXPECT_FAIL names;
  * each correct_*.py (a differently written correct solution) scores full marks.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from autograder import get_tests, labs, run_test
from autograder.notebook import extract, namespace, read

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
def test_variant(lab, path):
    spec = importlib.util.spec_from_file_location(f"variant_{lab}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expect_fail: dict = getattr(module, "EXPECT_FAIL")
    ns = namespace(path.read_text(encoding="utf-8"), str(path))
    results = _scores(lab, ns)
    unknown = set(expect_fail) - set(results)
    assert not unknown, f"{path.name} names tests that do not exist: {unknown}"
    if path.name.startswith("correct_"):
        assert expect_fail == {}, "a correct variant must expect no failures"
        for name, r in results.items():
            failed = [f"{c.name}: {c.message}" for c in r.cases if not c.passed]
            assert not failed, f"{path.name} is correct but {name} fails it: {failed}"
    else:
        assert expect_fail, f"{path.name} is a bug variant but names no case it must fail"
        for name, cases in expect_fail.items():
            by_name = {c.name: c for c in results[name].cases}
            missing = set(cases) - set(by_name)
            assert not missing, f"{path.name}: {name} has no cases {missing}"
            passed = [c for c in cases if by_name[c].passed]
            assert not passed, f"grader {name} lets the bug in {path.name} pass cases {passed}"


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
