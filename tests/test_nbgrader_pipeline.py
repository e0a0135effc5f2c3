"""The real nbgrader pipeline over every lab, with real CLI commands and kernels.

generate_assignment -> two submissions per lab (the unsolved release and the
solution) -> autograde -> generate_feedback -> export. The release must run to
the end and score 0 on every graded cell; the solution must score full marks;
feedback HTML must exist; the exported CSV must match the gradebook.
"""
import csv
import shutil
import subprocess
import sys

import pytest

from autograder.release import nbgrader_env
from notebooks import ROOT, lab_names

STUDENTS = {"unsolved": "labs", "solved": "solutions"}


def nbgrader(cwd, *args):
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_full_nbgrader_pipeline(tmp_path):
    from nbgrader.api import Gradebook

    labs = lab_names()
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    sub = tmp_path / "course" / "nbgrader" / "submitted"
    for lab in labs:
        nbgrader(tmp_path, "generate_assignment", lab, "--force")
        for student, folder in STUDENTS.items():
            src = (tmp_path / "labs" / lab) if folder == "labs" else (tmp_path / "solutions" / lab)
            shutil.copytree(src, sub / student / lab)
        nbgrader(tmp_path, "autograde", lab, "--force")
        nbgrader(tmp_path, "generate_feedback", lab, "--force")
    nbgrader(tmp_path, "export", "--to", str(tmp_path / "grades.csv"))

    db = "sqlite:///" + str(tmp_path / "course" / "nbgrader" / "gradebook.db")
    with Gradebook(db) as gb:
        for lab in labs:
            for student in STUDENTS:
                submission = gb.find_submission(lab, student)
                graded = [g for nb in submission.notebooks for g in nb.grades if g.auto_score is not None
                          or g.cell.max_score]
                assert graded, f"{lab}: no graded cells for {student}"
                for g in graded:
                    if student == "unsolved":
                        assert g.score == 0, f"{lab}: the unsolved release earns {g.score} on {g.name}"
                    else:
                        assert g.score == g.max_score, f"{lab}: the solution earns {g.score}/{g.max_score} on {g.name}"
                for nb in submission.notebooks:
                    feedback = tmp_path / "course" / "nbgrader" / "feedback" / student / lab / f"{nb.name}.html"
                    assert feedback.is_file() and "<html" in feedback.read_text(encoding="utf-8")[:2000].lower()
        rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
        for lab in labs:
            for student in STUDENTS:
                row = [r for r in rows if r["assignment"] == lab and r["student_id"] == student]
                assert len(row) == 1
                assert float(row[0]["score"]) == pytest.approx(gb.find_submission(lab, student).score)
                if student == "solved":
                    assert float(row[0]["score"]) == float(row[0]["max_score"]) > 0
                else:
                    assert float(row[0]["score"]) == 0
    # the autograded release really ran to the end: its last cell was executed
    import nbformat
    for lab in labs:
        for nb_path in (tmp_path / "course" / "nbgrader" / "autograded" / "unsolved" / lab).glob("*.ipynb"):
            nb = nbformat.read(str(nb_path), as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            assert code[-1].execution_count is not None, f"{lab}: autograde stopped before the last cell"
