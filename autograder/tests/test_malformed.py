"""Broken or unusual notebooks: a clear message, and 0 only for the parts affected.

Decision (documented in autograder/notebook.py, the one cell pipeline): cells run one at a time, so
a syntax error or an exception in one solution cell costs only the tests of what that
cell defines; a notebook that is not a readable nbformat-4 notebook gets 0 everywhere
with one message; the release's locked setup cells replace the student's (as nbgrader's
autograde does); code cells the student added contribute their imports/defs/classes only.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest

from autograder.core import get_tests, labs, run_test
from autograder.isolation import Limits, Runtime, grade_isolated, prepare
from autograder.notebook import strip_magics
from autograder.tests.submissions import release, solution, solution_cells, with_solution_code, write

LIMITS = Limits(timeout=120, test_timeout=30, case_timeout=15, cell_timeout=20)
FULL = sum(t.points for t in get_tests("lab00").values())   # lab00's full marks
GOOD = ("import torch\n\ndef greedy_token(logits):\n"
        "    if logits.dim() != 1:\n        raise ValueError(f'`logits` must be 1-D, got {tuple(logits.shape)}')\n"
        "    if torch.isnan(logits).any():\n        raise ValueError('`logits` must not contain NaN')\n"
        "    return int(torch.nonzero(logits == logits.max())[0, 0])\n")


# ---------------------------------------------------------------- unreadable files: no child at all

UNREADABLE = {
    "invalid_json": (b'{"cells": [', "not valid notebook JSON"),
    "empty_file": (b"", "not valid notebook JSON"),
    "binary": (bytes(range(256)) * 4, "not valid notebook JSON"),
    "nbformat3": (json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}).encode(), "nbformat-4"),
    "a_list": (b"[1, 2, 3]", "nbformat-4"),
    "cells_not_a_list": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                     "cells": "oops"}).encode(), "no list of cells"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_notebook_scores_zero_with_a_message(tmp_path, name):
    data, words = UNREADABLE[name]
    p = tmp_path / f"{name}.ipynb"
    p.write_bytes(data)
    sub = prepare(p, "lab00")
    assert sub.fatal and words in sub.fatal, sub.fatal
    with Runtime("lab00") as rt:
        g = grade_isolated(sub, rt, limits=LIMITS)
    assert g.score == 0 and g.max_score == sum(t.points for t in get_tests("lab00").values())
    assert g.restarts == 0 and g.problems[0] == sub.fatal
    for t in g.tests:
        for c in t.cases:
            assert not c.passed and words in c.message


def test_missing_file_is_a_clear_message(tmp_path):
    sub = prepare(tmp_path / "nope.ipynb", "lab00")
    assert "is not a file" in sub.fatal


# ---------------------------------------------------------------- notebooks that run

def _nb_json(nb) -> dict:
    return json.loads(nbformat.writes(nb))


def _cases(tmp_path) -> dict[str, tuple[Path, dict]]:
    """name -> (notebook, expectations)."""
    out = {}

    def add(name, nb_or_json, **exp):
        p = tmp_path / f"{name}.ipynb"
        if isinstance(nb_or_json, dict):
            p.write_text(json.dumps(nb_or_json))
        else:
            write(nb_or_json, p)
        out[name] = (p, exp)

    add("renamed_function", with_solution_code("lab00", {}, first=GOOD.replace("def greedy_token", "def greedy")),
        score=0, message="no function named `greedy_token`")
    nb = copy.deepcopy(release("lab00"))
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    add("deleted_solution_cell", nb, score=0, problem="is missing")
    nb = with_solution_code("lab00", {}, first=GOOD)
    cell = solution_cells(nb)[0]
    cell.cell_type = "markdown"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)
    add("solution_cell_made_markdown", nb, score=0, problem="is missing")
    nb = with_solution_code("lab00", {}, first="import torch\n\ndef greedy_token(logits):\n    return _pick(logits)\n")
    helper = nbformat.v4.new_code_cell(
        "import torch\nEPS = 0.0\n\ndef _pick(logits):\n"
        "    if logits.dim() != 1:\n        raise ValueError(f'`logits` must be 1-D, got {tuple(logits.shape)}')\n"
        "    if torch.isnan(logits).any():\n        raise ValueError('`logits` must not contain NaN')\n"
        "    return int(torch.nonzero(logits == logits.max())[0, 0])\n\n"
        "print('a demo the student left behind')\nraise RuntimeError('this line must not run when grading')\n")
    helper.metadata = {}
    nb.cells.insert(len(nb.cells) - 1, helper)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("my notes"))
    add("helper_in_added_cell", nb, score=FULL)
    add("magics", with_solution_code("lab00", {}, first="%load_ext autoreload\n!ls\n" + GOOD + "%time greedy_token\n"),
        score=FULL)
    raw = _nb_json(with_solution_code("lab00", {}, first=GOOD))
    for c in raw["cells"]:   # nbformat writes lists of lines; a plain string is valid too
        c["source"] = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    add("source_as_string", raw, score=FULL)
    nb = with_solution_code("lab00", {}, first="def greedy_token(logits):\n    return 0\n")
    dup = copy.deepcopy(solution_cells(nb)[0])
    dup.source = GOOD
    nb.cells.insert(nb.cells.index(solution_cells(nb)[0]) + 1, dup)
    add("duplicated_cell_later_wins", nb, score=FULL)
    nb = with_solution_code("lab00", {}, first=GOOD)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "imports":
            c.source = "import os\nos._exit(3)\n"   # the release's locked cell is used instead
    add("edited_locked_imports_cell", nb, score=FULL)
    add("syntax_error", with_solution_code("lab00", {}, first="def greedy_token(logits:\n    return 0\n"),
        score=0, problem="syntax error")
    add("runtime_error_after_def", with_solution_code("lab00", {}, first=GOOD + "\nundefined_name + 1\n"),
        score=FULL, problem="NameError")
    raw = _nb_json(with_solution_code("lab00", {}, first=GOOD))
    for c in raw["cells"]:
        if c["cell_type"] == "markdown":
            c["metadata"] = "not a dict"
    add("odd_metadata", raw, score=FULL)
    return out


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    from autograder.batch import Entry, grade_batch
    subs = tmp_path_factory.mktemp("malformed")
    cases = _cases(subs)
    out = tmp_path_factory.mktemp("out")
    entries = [Entry(name, p) for name, (p, _) in cases.items()]
    grade_batch(entries, "lab00", out, workers=2, limits=LIMITS, progress=False)
    recs = {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}
    return cases, recs


CASE_NAMES = ["renamed_function", "deleted_solution_cell", "solution_cell_made_markdown", "helper_in_added_cell",
              "magics", "source_as_string", "duplicated_cell_later_wins", "edited_locked_imports_cell",
              "syntax_error", "runtime_error_after_def", "odd_metadata"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_malformed_notebook(batch, name):
    cases, recs = batch
    _, exp = cases[name]
    rec = recs[name]
    assert rec["status"] == "graded", rec["problems"]
    assert rec["score"] == exp["score"], f"{name}: {rec['score']} {rec['problems']}"
    if "problem" in exp:
        assert any(exp["problem"] in p for p in rec["problems"]), rec["problems"]
    if "message" in exp:
        assert all(exp["message"] in c["message"] for t in rec["tests"] for c in t["cases"])
    assert "must not run" not in rec["output_tail"]


# ---------------------------------------------------------------- one broken cell among many

def _multi_cell_lab():
    for lab in labs():
        try:
            nb = release(lab)
        except FileNotFoundError:
            continue
        if len(solution_cells(nb)) >= 2:
            return lab
    return None


def _in_process_without(lab, broken_id):
    """Expected verdicts: run the solution's cells in-process, leaving out the broken one."""
    from autograder.notebook import is_setup, is_solution, read
    nb = read(solution(lab))
    ns = {"__name__": "__main__"}
    for c in nb.cells:
        if (is_setup(c) or is_solution(c)) and c.metadata["nbgrader"]["grade_id"] != broken_id:
            try:
                src = "".join(c.source) if isinstance(c.source, list) else c.source
                exec(compile(strip_magics(src), f"<{c.metadata['nbgrader']['grade_id']}>", "exec"), ns)
            except Exception:
                pass
    return {name: run_test(t, ns) for name, t in get_tests(lab).items()}


@pytest.mark.slow
def test_a_syntax_error_in_one_cell_zeroes_only_that_cells_tests(tmp_path):
    lab = _multi_cell_lab()
    if lab is None:
        pytest.skip("no lab with two solution cells yet")
    nb = nbformat.read(str(solution(lab)), as_version=4)
    cells = solution_cells(nb)
    broken = cells[len(cells) // 2]
    broken_id = broken.metadata["nbgrader"]["grade_id"]
    broken.source = broken.source + "\n    this is not python (\n"
    p = write(nb, tmp_path / f"{lab}.ipynb")
    with Runtime(lab) as rt:
        g = grade_isolated(prepare(p, lab), rt, limits=Limits())
    assert any("syntax error" in pr and broken_id in pr for pr in g.problems), g.problems
    expected = _in_process_without(lab, broken_id)
    full = sum(t.points for t in get_tests(lab).values())
    assert 0 < g.score < full, "the other cells' tests keep their points; the broken cell's tests lose theirs"
    for r in g.tests:
        want = {c.name: c.passed for c in expected[r.name].cases}
        got = {c.name: c.passed for c in r.cases}
        assert got == want, f"{lab}/{r.name}: isolated {got} != in-process without `{broken_id}` {want}"
