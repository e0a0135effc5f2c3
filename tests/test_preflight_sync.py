"""Preflight of a submission folder, and nbgrader's gradebook carrying the isolated grader's
scores: on a small corpus, the two grading paths agree, and the gradebook ends up with
grades no kernel trick raised."""
import copy
import csv
import json
import shutil

import nbformat
import pytest

from autograder import get_tests

from autograder import preflight
from autograder.cli import main as cli
from autograder.isolation import prepare
from notebooks import ROOT

REFERENCE = (ROOT / "autograder" / "reference" / "lab00.py").read_text()
BUG_TIE = (ROOT / "autograder" / "variants" / "lab00" / "bug_tie_highest_id.py").read_text()


def release(lab="lab00"):
    return nbformat.read(str(ROOT / "labs" / lab / f"{lab}.ipynb"), as_version=4)


def solved(code=REFERENCE, lab="lab00"):
    nb = release(lab)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = code
            break
    return nb


def stripped(nb):
    nb = copy.deepcopy(nb)
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)
    return nb


def as_v3_text(nb) -> str:
    return nbformat.writes(nbformat.convert(nb, 3), version=3)


def put(folder, student, nb_or_text, lab="lab00"):
    path = folder / student / lab / f"{lab}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb_or_text if isinstance(nb_or_text, str) else nbformat.writes(nb_or_text))
    return path


def with_duplicate_test_cell(nb):
    nb = copy.deepcopy(nb)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    twin = copy.deepcopy(test)
    twin["id"] = "copied-test-cell"
    nb.cells.append(twin)
    return nb


def findings(folder, fix=False):
    return {f.student: f for f in preflight.preflight(folder, "lab00", fix=fix)}


def test_preflight_reports_each_malformed_notebook_and_passes_a_clean_one(tmp_path):
    sub = tmp_path / "submitted"
    put(sub, "clean", solved())
    put(sub, "v3", as_v3_text(solved()))
    put(sub, "stripped", stripped(solved()))
    put(sub, "dup", with_duplicate_test_cell(solved()))
    put(sub, "wrong_lab", release("lab01"))
    put(sub, "unreadable", "{not json")
    shadow = put(sub, "shadow", solved()).parent / "autograder"
    shadow.mkdir()
    (shadow / "kernel.py").write_text("def grade(*a): return 5.0\n")
    f = findings(sub)
    assert f["clean"].ok and not f["clean"].fixed
    assert any("nbformat 3" in p for p in f["v3"].problems)
    assert any("nbgrader metadata missing" in p and "greedy_token" in p for p in f["stripped"].problems)
    assert any("duplicate grade_ids greedy_token_picks_argmax" in p for p in f["dup"].problems)
    assert f["wrong_lab"].problems == ["wrong lab: it is lab01's notebook, not lab00's"]
    assert any(p.startswith("unreadable: not valid notebook JSON") for p in f["unreadable"].problems)
    assert any("would shadow the `autograder` package" in p for p in f["shadow"].problems)
    assert cli(["preflight", str(sub), "--lab", "lab00"]) == 1
    assert (sub / "shadow" / "lab00" / "autograder").is_dir()      # without --fix nothing moves


def test_preflight_fix_repairs_what_it_can_and_keeps_the_original(tmp_path):
    sub = tmp_path / "submitted"
    v3 = put(sub, "v3", as_v3_text(solved()))
    bare = put(sub, "stripped", stripped(solved()))
    dup = put(sub, "dup", with_duplicate_test_cell(solved()))
    shadow = put(sub, "shadow", solved()).parent / "torch.py"
    shadow.write_text("raise SystemExit\n")
    assert prepare(v3, "lab00").fatal                                # the isolated grader refuses v3
    assert not prepare(bare, "lab00").cells[-1].kind == "solution"  # and sees no solution cell
    f = findings(sub, fix=True)
    assert all(x.ok and x.fixed for x in f.values()), {k: (x.problems, x.fixed) for k, x in f.items()}
    for path in (v3, bare, dup):
        assert path.with_name(path.name + ".orig").is_file()
        nb = nbformat.read(str(path), as_version=4)
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)) and {"greedy_token", "greedy_token_picks_argmax"} <= set(ids)
        sub_ = prepare(path, "lab00")
        assert not sub_.fatal and [c.id for c in sub_.cells if c.kind == "solution"] == ["greedy_token"]
    assert not shadow.exists() and (tmp_path / "submitted.quarantine" / "shadow" / "lab00" / "torch.py").is_file()
    assert all(x.ok and not x.fixed for x in findings(sub).values())   # a second run finds nothing
    assert cli(["preflight", str(sub), "--lab", "lab00"]) == 0


# ---------------------------------------------------------------- the corpus, both paths, and the gradebook

HONEST = {
    "honest": REFERENCE,
    "logging_info": "import logging\nlogging.basicConfig(level=logging.INFO)\n" + REFERENCE.replace(
        "    best = logits.max()", "    logging.info('picking the greedy token')\n    best = logits.max()"),
    "os_write_fd2": "import os\n" + REFERENCE.replace(
        "    best = logits.max()", "    os.write(2, b'debug: picking\\n')\n    best = logits.max()"),
    "partial": BUG_TIE,
    "stub": "def greedy_token(logits):\n    raise NotImplementedError()\n",
}
# replaces the grader in the kernel: full marks under nbgrader, whatever the code does
FORGER = ("import autograder.kernel as _k\n_k.grade = lambda lab, name, ns: 5.0\n"
          "def greedy_token(logits):\n    raise NotImplementedError()\n")


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
