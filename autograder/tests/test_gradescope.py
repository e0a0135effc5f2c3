"""The Gradescope autograder zip, and run_autograder in a local stand-in of /autograder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import reports
from autograder.core import get_tests
from autograder.gradescope import build_bundle, requirements
from autograder.isolation import Sandbox
from autograder.tests.submissions import from_variant, write

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_bundle("lab00", tmp_path_factory.mktemp("gs"))


def test_bundle_has_what_grading_needs_and_no_solutions(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "requirements.txt", "lab.json", "autograder/core.py",
                "autograder/isolation/driver.py", "autograder/isolation/child.py", "autograder/graders/lab00/probes.py",
                "autograder/graders/lab00/test_greedy_token.py", "autograder/reference/lab00.py", "autograder/plugin.py",
                "course/__init__.py", "datasets/fixtures/peaked.json", "labs/lab00/lab00.ipynb"} <= names
        assert not [n for n in names if n.startswith(("solutions/", "autograder/variants/", "autograder/tests/"))]
        assert [n for n in names if n.endswith(".ipynb")] == ["labs/lab00/lab00.ipynb"]
        assert not [n for n in names if n.startswith("autograder/graders/lab") and not n.startswith("autograder/graders/lab00/")]
        for n in names:
            text = z.read(n)
            assert b"### BEGIN SOLUTION" not in text and b"### BEGIN HIDDEN TESTS" not in text, n
        info = z.getinfo("run_autograder")
        assert (info.external_attr >> 16) & 0o111, "run_autograder must be executable"
        assert b"AUTOGRADER_ROOT" in z.read("run_autograder") and b"--lab lab00" in z.read("run_autograder")
    reqs = requirements()
    assert any(r.startswith("torch") for r in reqs) and not any(r.startswith("nbgrader") for r in reqs)
    assert any(r.startswith("pytest") for r in reqs), "pytest judges the graders of a lab in package form"


def _standin(tmp_path, bundle, submission: Path | None):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    if submission is not None:
        shutil.copy(submission, root / "submission" / submission.name)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AUTOGRADER_ROOT": str(root),
           "AUTOGRADER_PYTHON": sys.executable, "HOME": str(tmp_path)}
    p = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    return results, p.stdout, root


def test_run_autograder_grades_a_submission_and_writes_valid_results(tmp_path, bundle):
    bug = ROOT / "autograder" / "variants" / "lab00" / "bug_nan_not_checked.py"
    nb = write(from_variant("lab00", bug), tmp_path / "lab00.ipynb")
    results, stdout, root = _standin(tmp_path, bundle, nb)
    assert reports.validate_gradescope(results) == []
    full = sum(t.points for t in get_tests("lab00").values())
    assert results["score"] == full - 2, "nan_rejected and non_1d_rejected fail"
    assert sum(t["max_score"] for t in results["tests"]) == full
    names = {t["name"]: t for t in results["tests"]}
    hidden = names["greedy_token_picks_argmax (hidden checks)"]
    assert hidden["visibility"] == "after_published" and hidden["score"] == 3 and "FAIL nan_rejected" in hidden["output"]
    assert names["greedy_token_picks_argmax (checks)"]["visibility"] == "visible"
    assert f"lab00: {full - 2:g}/{full:g}" in stdout
    if not Sandbox.detect().weak:
        assert f"'os_sandbox': '{Sandbox.detect().tier}'" in stdout, "the container run grades inside the OS sandbox"


def test_run_autograder_refuses_without_the_os_sandbox(tmp_path, monkeypatch):
    """Without bubblewrap the container grades nothing for credit and says why."""
    from autograder.gradescope import run_in_container
    monkeypatch.setenv("AUTOGRADER_BWRAP", str(tmp_path / "no-such-bwrap"))
    monkeypatch.setenv("AUTOGRADER_CONTAINER_TIER", "off")   # no fallback tier either (as root it would run)
    bug = ROOT / "autograder" / "variants" / "lab00" / "bug_nan_not_checked.py"
    (tmp_path / "submission").mkdir()
    write(from_variant("lab00", bug), tmp_path / "submission" / "lab00.ipynb")
    assert run_in_container("lab00", tmp_path) == 2
    res = json.loads((tmp_path / "results" / "results.json").read_text())
    assert res["score"] == 0 and "could not isolate" in res["output"] and "--allow-weak-isolation" in res["output"]


def test_run_autograder_without_a_notebook_says_so(tmp_path, bundle):
    results, _, _ = _standin(tmp_path, bundle, None)
    assert reports.validate_gradescope(results) == []
    assert results["score"] == 0 and "No .ipynb file" in results["output"]


def test_validator_rejects_what_gradescope_would():
    good = {"score": 1.0, "tests": [{"name": "t", "score": 1, "max_score": 1, "output": "", "visibility": "visible"}]}
    assert reports.validate_gradescope(good) == []
    assert reports.validate_gradescope({"score": 1, "tests": [{"name": "t", "score": 1}]})
    assert reports.validate_gradescope({**good, "score": 2})          # total != sum of tests
    bad = json.loads(json.dumps(good))
    bad["tests"][0]["visibility"] = "sometimes"
    assert reports.validate_gradescope(bad)
    bad = json.loads(json.dumps(good))
    bad["tests"][0]["score"] = 3
    assert reports.validate_gradescope(bad)
