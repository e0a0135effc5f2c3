"""Adversarial submissions cannot raise their score or stop the batch.

The corpus (autograder/tests/adversarial/*.py) is turned into lab00 notebooks (the
release with its solution cell replaced) and graded in ONE standalone batch with short
limits. Each file's EXPECT says the most points it may get, what its output must show
(proof the attack really ran) and must never show (proof each attempt failed). The
files the parent judges with are hashed before and after. The in-kernel (nbgrader)
harness is checked too where that is safe in-process: the int subclass whose == always
answers True gets no credit there either.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from autograder.isolation import Limits, Sandbox
from autograder.tests import adversarial

ROOT = Path(__file__).resolve().parents[2]
SECRET = "AUTOGRADER_TEST_SECRET"


def _tree_hashes():
    out = {}
    for folder in ("autograder/graders", "autograder/reference", "datasets/fixtures"):
        for p in sorted((ROOT / folder).glob("*")):
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    out[str(ROOT / "autograder" / "core.py")] = hashlib.sha256((ROOT / "autograder" / "core.py").read_bytes()).hexdigest()
    return out


LIMITS = Limits(timeout=90, test_timeout=5, case_timeout=2.5, cell_timeout=8, memory=2 << 30,
                output_tail=400_000, max_deaths_per_test=2)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, monkeypatch_module):
    from autograder.batch import discover, grade_batch
    monkeypatch_module.setenv(SECRET, "hunter2-do-not-leak")
    subs = tmp_path_factory.mktemp("adversarial")
    adversarial.build(subs)
    before = _tree_hashes()
    out = tmp_path_factory.mktemp("grades")
    summary = grade_batch(discover([subs], "lab00"), "lab00", out, workers=2, limits=LIMITS, progress=False)
    after = _tree_hashes()
    records = {}
    for p in (out / "students").glob("*.json"):
        rec = json.loads(p.read_text())
        records[rec["student"]] = rec
    return {"summary": summary, "records": records, "before": before, "after": after, "out": out}


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


NAMES = sorted(adversarial.sources())


def test_the_corpus_is_not_empty_and_every_file_says_what_it_expects():
    assert len(NAMES) >= 15
    for name, path in adversarial.sources().items():
        exp = adversarial.expectations(path)
        assert "max_score" in exp, name
        assert path.read_text().lstrip().startswith('"""'), f"{name} needs a docstring saying what it tries"


def test_the_batch_survives_every_attack(graded):
    s = graded["summary"]
    assert sorted(s.graded) == NAMES, "every adversarial student got a record"
    assert not s.errors, s.errors
    rows = (graded["out"] / "grades.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_attack_cannot_raise_the_score(graded, name):
    exp = adversarial.expectations(adversarial.sources()[name])
    if exp.get("needs_os"):
        sb = Sandbox.detect()
        if sb.uid_base is None and not sb.mount_ns:
            pytest.skip("needs the OS-level sandbox (root): without it this is a documented residual risk")
    rec = graded["records"][name]
    assert rec["status"] == "graded", rec["problems"]
    assert rec["score"] <= exp["max_score"], f"{name} earned {rec['score']}: {rec['problems']}"
    assert rec["max_score"] == 5
    out = rec["output_tail"]
    for s in exp.get("output_has", []):
        assert s in out, f"{name}: the attack did not run as planned (no {s!r} in its output)"
    for s in exp.get("output_not", []):
        assert s not in out, f"{name}: {s!r} appeared: an attempt succeeded\n{out[-3000:]}"
    if "problem" in exp:
        text = " ".join(rec["problems"]) + " " + " ".join(c["message"] for t in rec["tests"] for c in t["cases"])
        assert exp["problem"].lower() in text.lower(), f"{name}: no message mentions {exp['problem']!r}: {text[:800]}"
    for t in rec["tests"]:
        for c in t["cases"]:
            assert c["message"], f"{name}: failed case {c['name']} has no message"


def test_no_attack_changed_what_the_parent_judges_with(graded):
    assert graded["before"] == graded["after"]


def test_fake_passed_lines_are_only_text(graded):
    rec = graded["records"]["fake_passed"]
    assert "PASS peaked_distribution" in rec["output_tail"]
    assert all(not c["passed"] for t in rec["tests"] for c in t["cases"])


def test_dead_children_cost_only_the_cases_they_reached(graded):
    for name in ("os_exit", "hang", "thread_exit"):
        rec = graded["records"][name]
        assert rec["restarts"] >= 1, f"{name}: a new child should have been started after a death"
        msgs = [c["message"] for t in rec["tests"] for c in t["cases"]]
        assert all(msgs), msgs
        first = msgs[0]
        assert "exited" in first or "timed out" in first, f"{name}: {first}"


def test_a_correct_function_after_a_top_level_exit_is_graded(tmp_path):
    """sys.exit() at the end of a cell only ends that cell (as in Jupyter): what the
    cell defined before it is kept and earns its points."""
    from autograder.isolation import Runtime, grade_isolated, prepare
    from autograder.tests.submissions import with_solution_code, write
    code = ("import sys\nimport torch\n\ndef greedy_token(logits):\n"
            "    if torch.isnan(logits).any():\n        raise ValueError('`logits` must not contain NaN')\n"
            "    return int(torch.nonzero(logits == logits.max())[0, 0])\n\nsys.exit(0)\n")
    nb = write(with_solution_code("lab00", {}, first=code), tmp_path / "exit_after.ipynb")
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(nb, "lab00"), rt, limits=LIMITS)
    assert g.score == 5, g.problems
    assert any("sys.exit" in p for p in g.problems)


def test_eq_cheat_gets_no_credit_in_the_kernel_harness_either():
    """nbgrader's hidden cells call autograder.kernel.grade in the student's kernel; the
    same probes refuse an int subclass (core.to_plain), so it scores 0 there too."""
    from autograder.core import get_tests, run_test
    from autograder.notebook import namespace
    src = adversarial.sources()["eq_cheat"].read_text()
    ns = namespace(src, "eq_cheat.py")
    for test in get_tests("lab00").values():
        r = run_test(test, ns)
        assert r.score == 0
        assert all("subclass" in c.message for c in r.cases if c.name != "nan_rejected")


@pytest.mark.slow
def test_python_level_protection_alone_stops_the_python_attacks(tmp_path, monkeypatch):
    """Without root (a learner's laptop) only the Python-level policy applies: the audit
    hook, the import blocker, the stubbed reference and the namespace snapshots. It must
    stop every attack that does not need a native file reader."""
    from autograder.batch import Entry, grade_batch
    monkeypatch.setenv(SECRET, "hunter2-do-not-leak")
    names = ["read_reference", "overwrite_files", "secrets_env", "kill_parent", "monkeypatch", "fake_passed"]
    built = adversarial.build(tmp_path / "subs")
    before = _tree_hashes()
    out = tmp_path / "out"
    grade_batch([Entry(n, built[n]) for n in names], "lab00", out, workers=2, limits=LIMITS, progress=False,
                sandbox="python")
    assert _tree_hashes() == before
    for n in names:
        rec = json.loads((out / "students" / f"{n}.json").read_text())
        assert rec["sandbox"]["drops_root"] is False and rec["sandbox"]["mount_namespace"] is False
        exp = adversarial.expectations(adversarial.sources()[n])
        assert rec["score"] <= exp["max_score"], (n, rec["problems"])
        for s in exp.get("output_not", []):
            assert s not in rec["output_tail"], f"{n}: {s!r} appeared with Python-level protection only"
        for s in exp.get("output_has", []):
            assert s in rec["output_tail"], n
