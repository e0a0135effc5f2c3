"""nbgrader's gradebook carrying the isolated grader's scores: on a small corpus of lab00
submissions (preflight repairs three, one forges its grade in the kernel), the two grading
paths agree on honest work, and after gradebook-sync the gradebook, nbgrader's export and
the forger's feedback hold the isolated scores. Runs nbgrader autograde (about two minutes)."""
import csv
import json
import shutil

import pytest

from autograder import get_tests, preflight
from autograder.cli import main as cli
from autograder.tests.preflight_corpus import (FORGER, HONEST, ROOT, as_v3_text, put, solved, stripped,
                                               with_duplicate_test_cell)


@pytest.mark.slow
def test_both_paths_agree_on_a_corpus_and_the_gradebook_gets_the_isolated_scores(tmp_path, capsys):
    from autograder.batch import Entry, grade_batch
    from autograder.isolation import Limits
    from autograder.release import run_nbgrader
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / "lab00", course / "solutions" / "lab00")
    sub = course / "course" / "nbgrader" / "submitted"
    for name, code in HONEST.items():
        put(sub, name, solved(code))
    put(sub, "v3", as_v3_text(solved()))
    put(sub, "stripped", stripped(solved()))
    put(sub, "duplicate_ids", with_duplicate_test_cell(solved()))
    put(sub, "forger", solved(FORGER))
    # preflight fixes what it can and names the forger's kernel trick (a problem it leaves for the isolated grade)
    assert cli(["preflight", str(sub), "--lab", "lab00", "--fix"]) == 1
    report = capsys.readouterr().out
    assert "kernel trick" in report.split("forger:", 1)[1].split("\n\n")[0].split("stripped:")[0], report
    assert report.count("PROBLEM") == 1, report

    run_nbgrader(course, "generate_assignment", "lab00", "--force")
    run_nbgrader(course, "autograde", "lab00", "--force")
    db = "sqlite:///" + str(course / "course" / "nbgrader" / "gradebook.db")

    def nbgrader_scores():
        with Gradebook(db) as gb:
            return {s.student.id: {g.name: float(g.score) for nb in s.notebooks for g in nb.grades}
                    for s in gb.assignment_submissions("lab00")}

    before = nbgrader_scores()
    out = tmp_path / "grades"
    entries = [Entry(s, p) for s, p in preflight.submissions(sub, "lab00")]
    grade_batch(entries, "lab00", out, workers=1, limits=Limits(), progress=False)
    isolated = {json.loads(p.read_text())["student"]: {t["name"]: t["score"] for t in json.loads(p.read_text())["tests"]}
                for p in (out / "students").glob("*.json")}
    expected = {"honest": 5, "logging_info": 5, "os_write_fd2": 5, "v3": 5, "stripped": 5, "duplicate_ids": 5,
                "stub": 0, "forger": 0}
    for student, total in expected.items():
        assert sum(isolated[student].values()) == total, (student, isolated[student])
    assert 0 < sum(isolated["partial"].values()) < 5
    for student in isolated:           # honest work: the same points, cell by cell, on both paths
        if student != "forger":
            assert before[student] == pytest.approx(isolated[student]), student
    assert sum(before["forger"].values()) == 5    # the kernel forged it under nbgrader

    assert cli(["gradebook-sync", "--lab", "lab00", "--grades", str(out), "--db", db]) == 0
    after = nbgrader_scores()
    assert after == {s: pytest.approx(v) for s, v in isolated.items()}
    assert cli(["gradebook-sync", "--lab", "lab00", "--grades", str(out), "--db", db]) == 0
    assert nbgrader_scores() == after                                  # idempotent
    run_nbgrader(course, "export", "--to", str(tmp_path / "grades.csv"))
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert rows["forger"] == 0 and rows["honest"] == 5
    run_nbgrader(course, "generate_feedback", "lab00", "--force")
    html = (course / "course" / "nbgrader" / "feedback" / "forger" / "lab00" / "lab00.html").read_text()
    total = sum(t.points for t in get_tests("lab00").values())
    assert f"0.0 / {total:.1f}" in html
