"""Notebooks in git: outputs stripped, nbgrader metadata intact, nothing hidden leaks."""
import re

import nbformat
import pytest

from notebooks import ROOT, lab_names, notebooks, read

ALL = notebooks("solutions") + notebooks("labs")
BEGIN = {"solution": "### BEGIN SOLUTION", "hidden": "### BEGIN HIDDEN TESTS"}
END = {"solution": "### END SOLUTION", "hidden": "### END HIDDEN TESTS"}


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_outputs_stripped(path):
    nb = read(path)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: cell {cell.get('id')} has outputs; strip them"
            assert cell.execution_count is None, f"{path.name}: cell {cell.get('id')} has an execution count"


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_nbgrader_metadata_intact(path):
    nb = read(path)
    seen = set()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        assert meta is not None, f"{path.name}: a cell without nbgrader metadata: {cell.source[:60]!r}"
        gid = meta.get("grade_id")
        assert gid and re.fullmatch(r"[a-z0-9_]+", gid), f"{path.name}: grade_id {gid!r} is not snake_case"
        assert gid not in seen, f"{path.name}: duplicate grade_id {gid}"
        seen.add(gid)
        assert meta.get("schema_version") == 3
        if meta.get("grade"):
            assert float(meta.get("points", 0)) > 0, f"{path.name}: graded cell {gid} has no points"
            if cell.cell_type == "code" and not meta.get("solution"):
                first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
                assert first.startswith('"""'), f"{path.name}: test cell {gid} must open with a one-line docstring"
        if meta.get("solution"):
            assert not meta.get("locked"), f"{path.name}: solution cell {gid} is locked"
        else:
            assert meta.get("locked"), f"{path.name}: cell {gid} should be locked"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", notebooks("solutions"), ids=ids(notebooks("solutions")))
def test_solution_notebook_has_solutions_hidden_tests_summary_exercises(path):
    nb = read(path)
    text = "\n".join(c.source for c in nb.cells)
    assert BEGIN["solution"] in text and BEGIN["hidden"] in text
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Summary" in md and "## Exercises" in md


def _blocks(source, kind):
    out, inside = [], False
    for line in source.splitlines():
        s = line.strip()
        if s == BEGIN[kind]:
            inside = True
        elif s == END[kind]:
            inside = False
        elif inside and s and not s.startswith("#") and s not in ("pass", "return", "...", "continue", "break", "else:", "try:", "finally:") and len(s) > 6 \
                and not re.fullmatch(r"(return|yield) \w+", s):  # `return out` is no leak
            out.append(s)
    return out


def _outside_blocks(source):
    inside = False
    for line in source.splitlines():
        s = line.strip()
        if s in (BEGIN["solution"], BEGIN["hidden"]):
            inside = True
        elif s in (END["solution"], END["hidden"]):
            inside = False
        elif not inside:
            yield s


@pytest.mark.parametrize("lab", lab_names())
def test_no_solution_or_hidden_test_line_leaks_into_the_release(lab):
    released = [p for p in (ROOT / "labs" / lab).glob("*.ipynb")]
    assert released, f"labs/{lab} is missing: run `make release`"
    release_lines = {line.strip() for p in released for c in read(p).cells for line in c.source.splitlines()}
    for src in (ROOT / "solutions" / lab).glob("*.ipynb"):
        cells = read(src).cells
        # a line the source also shows outside its hidden blocks (a demo calling the
        # function, say) is public by design, not a leak
        public = {line.strip() for c in cells for line in _outside_blocks(c.source)}
        for cell in cells:
            for kind in ("solution", "hidden"):
                leaked = [line for line in _blocks(cell.source, kind)
                          if line in release_lines and line not in public]
                assert not leaked, f"{lab}: {kind} lines appear in the release: {leaked[:3]}"
    for p in released:
        text = p.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text


def test_leak_scan_would_catch_a_leak():
    cell = "def f():\n    ### BEGIN SOLUTION\n    return secret_answer + 1\n    ### END SOLUTION\n"
    assert _blocks(cell, "solution") == ["return secret_answer + 1"]
