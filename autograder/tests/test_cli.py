"""The command line: `check` for learners, `grade` for instructors, argument errors."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.cli import main
from autograder.core import get_tests
from autograder.release import nbgrader_env
from autograder.tests.submissions import from_variant, solution, write

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=600)


def test_check_release_notebook_reports_the_visible_cases_and_fails():
    p = run("check", "labs/lab00/lab00.ipynb")
    assert p.returncode == 1, p.stderr
    assert "greedy_token_picks_argmax: visible checks" in p.stdout
    assert "FAIL peaked_distribution" in p.stdout and "hint:" in p.stdout
    assert "0/1 visible checks passed (keep going)" in p.stdout
    assert "exact_tie_goes_to_lowest_id" not in p.stdout, "hidden cases are not run by check"


def test_check_a_solved_copy_passes_lab_from_the_file_name(tmp_path):
    nb = tmp_path / "my_lab00_attempt.ipynb"
    shutil.copy(solution("lab00"), nb)
    p = run("check", str(nb))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS peaked_distribution" in p.stdout and "1/1 visible checks passed (all passed)" in p.stdout


def test_check_needs_a_lab(tmp_path, capsys):
    nb = tmp_path / "homework.ipynb"
    shutil.copy(solution("lab00"), nb)
    assert main(["check", str(nb)]) == 2
    assert "pass --lab" in capsys.readouterr().err
    assert main(["check", str(nb), "--lab", "lab99"]) == 2
    assert "`--lab` must be one of" in capsys.readouterr().err


def test_bad_limits_and_workers_are_refused(tmp_path, capsys):
    assert main(["grade", str(tmp_path), "--lab", "lab00", "--out", str(tmp_path / "o"), "--workers", "0"]) == 2
    assert "`--workers` must be at least 1" in capsys.readouterr().err
    assert main(["check", "labs/lab00/lab00.ipynb", "--memory-gib", "0.5"]) == 2
    assert "`--memory-gib` must be at least 1" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "missing"), "--lab", "lab00", "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_grade_one_notebook_writes_every_report(tmp_path):
    bug = ROOT / "autograder" / "variants" / "lab00" / "bug_tie_highest_id.py"
    nb = write(from_variant("lab00", bug), tmp_path / "subs" / "zoe.ipynb")
    out = tmp_path / "grades"
    p = run("grade", str(nb), "--lab", "lab00", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "graded 1" in p.stdout
    rec = json.loads((out / "students" / "zoe.json").read_text())
    full = sum(t.points for t in get_tests("lab00").values())
    assert rec["lab"] == "lab00" and rec["score"] == full - 2 and rec["max_score"] == full
    assert rec["grader_version"] and rec["submission_sha256"] and rec["harness"] == "standalone"
    fb = (out / "feedback" / "zoe.md").read_text()
    assert "First failing case: **`exact_tie_goes_to_lowest_id`** on fixture `ties`" in fb
    assert "- expected: " in fb and "- got: " in fb and "- hint: " in fb
    gs = json.loads((out / "gradescope" / "zoe" / "results.json").read_text())
    assert gs["score"] == full - 2 and sum(t["max_score"] for t in gs["tests"]) == full
    lines = (out / "grades.csv").read_text().splitlines()
    assert lines[0].startswith("student_id,lab,score,max_score") and lines[1].startswith(f"zoe,lab00,{full - 2:g},{full:g}")
