"""The real nbgrader pipeline over every lab, with real CLI commands and kernels.

generate_assignment -> two submissions per lab (the unsolved release and the
solution) -> autograde -> generate_feedback -> export. The release must run to
the end and score 0 on every graded cell; the solution must score full marks;
feedback HTML must exist; the exported CSV must match the gradebook.

This is also the one run of each solution notebook top to bottom (autograde
executes every cell of the solved submission, demos and plots included, on the
CPU with MPLBACKEND=Agg): no cell of it may end in an error.

Each lab gets its own scratch course root so labs run in parallel (one per core).
"""
import csv
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from autograder.release import run_nbgrader
from notebooks import ROOT, lab_names

STUDENTS = {"unsolved": "labs", "solved": "solutions"}


def run_lab(lab, root):
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / lab, root / "solutions" / lab)
    sub = root / "course" / "nbgrader" / "submitted"
    run_nbgrader(root, "generate_assignment", lab, "--force")
    for student, folder in STUDENTS.items():
        shutil.copytree(root / folder / lab, sub / student / lab)
    start = time.perf_counter()
    run_nbgrader(root, "autograde", lab, "--force")
    seconds = time.perf_counter() - start
    run_nbgrader(root, "generate_feedback", lab, "--force")
    run_nbgrader(root, "export", "--to", str(root / "grades.csv"))
    return seconds


@pytest.mark.slow
def test_full_nbgrader_pipeline(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    monkeypatch.setenv("MPLBACKEND", "Agg")  # nbgrader's kernels inherit it: plots draw without a display
    labs = lab_names()
    with ThreadPoolExecutor(max_workers=max(1, min(len(labs), os.cpu_count() or 1))) as pool:
        seconds = dict(zip(labs, pool.map(lambda lab: run_lab(lab, tmp_path / lab), labs)))
    for lab, s in seconds.items():
        print(f"{lab}: autograde {s / len(STUDENTS):.1f} s per notebook")

    for lab in labs:
        root = tmp_path / lab
        with Gradebook("sqlite:///" + str(root / "course" / "nbgrader" / "gradebook.db")) as gb:
            for student in STUDENTS:
                submission = gb.find_submission(lab, student)
                graded = [g for nb in submission.notebooks for g in nb.grades if g.max_score]
                assert graded, f"{lab}: no graded cells for {student}"
                for g in graded:
                    if student == "unsolved":
                        assert g.score == 0, f"{lab}: the unsolved release earns {g.score} on {g.name}"
                    else:
                        assert g.score == g.max_score, f"{lab}: the solution earns {g.score}/{g.max_score} on {g.name}"
                for nb in submission.notebooks:
                    feedback = root / "course" / "nbgrader" / "feedback" / student / lab / f"{nb.name}.html"
                    assert feedback.is_file() and "<html" in feedback.read_text(encoding="utf-8")[:2000].lower()
            rows = list(csv.DictReader((root / "grades.csv").open()))
            for student in STUDENTS:
                row = [r for r in rows if r["assignment"] == lab and r["student_id"] == student]
                assert len(row) == 1
                assert float(row[0]["score"]) == pytest.approx(gb.find_submission(lab, student).score)
                if student == "solved":
                    assert float(row[0]["score"]) == float(row[0]["max_score"]) > 0
                else:
                    assert float(row[0]["score"]) == 0
        # the autograded release really ran to the end: its last code cell was executed
        for nb_path in (root / "course" / "nbgrader" / "autograded" / "unsolved" / lab).glob("*.ipynb"):
            nb = nbformat.read(str(nb_path), as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            assert code[-1].execution_count is not None, f"{lab}: autograde stopped before the last cell"
        # the solution notebook ran top to bottom without an error in any cell
        solved = sorted((root / "course" / "nbgrader" / "autograded" / "solved" / lab).glob("*.ipynb"))
        assert solved, f"{lab}: no autograded solution notebook"
        for nb_path in solved:
            nb = nbformat.read(str(nb_path), as_version=4)
            for cell in nb.cells:
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                name = cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id", "?"))
                assert cell.execution_count is not None, f"{lab}/{nb_path.name}: cell {name} never ran"
                errors = [o for o in cell.outputs if o.output_type == "error"]
                assert not errors, f"{lab}/{nb_path.name} cell {name}: {errors[0]['ename']}: {errors[0]['evalue']}"
