"""Code that reaches into the grader's objects is flagged for review; the grader's block count
catches a change made to it from the student's side.

The grader measures labs 05 and 07 through checks.Ledger, an object in the student's process;
an allocator can find it one frame up and rewrite its count (measures/lab05_ledger_frame_walk:
74/74 before the ledger kept its second count, the same leak told truthfully 58/74). The
static scan (preflight.introspection_in) lists such code in the standalone record, the class
CSV and preflight's report, and never changes a score; no course solution, release or variant
is flagged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autograder import preflight, reports
from autograder.checks import Fail, Ledger, audited, ledger_counts

ROOT = Path(__file__).resolve().parents[2]
MEASURES = Path(__file__).resolve().parent / "adversarial" / "measures"

FLAGGED = [
    ("import sys\ndef f():\n    return sys._getframe(1).f_locals['self']", "sys._getframe"),
    ("def f(frame):\n    return frame.f_back", "f_back"),
    ("def f(frame):\n    return frame.f_globals", "f_globals"),
    ("def f(e):\n    return e.__traceback__.tb_frame", "tb_frame"),
    ("def f(g):\n    return g.gi_frame", "gi_frame"),
    ("async def f(c):\n    return c.cr_frame", "cr_frame"),
    ("def f(fn):\n    return fn.__closure__[0].cell_contents", "__closure__"),
    ("def f(fn):\n    return fn.__globals__", "__globals__"),
    ("import inspect\ndef f():\n    return inspect.currentframe()", "inspect.currentframe"),
    ("import inspect\ndef f():\n    return inspect.stack()", "inspect.stack"),
    ("import inspect\ndef f(fr):\n    return inspect.getouterframes(fr)", "inspect.getouterframes"),
    ("from inspect import currentframe\n", "inspect.currentframe"),
    ("from sys import _getframe\n", "sys._getframe"),
    ("import traceback\ndef f():\n    return list(traceback.walk_stack(None))", "traceback.walk_stack"),
    ("import traceback\ndef f():\n    return traceback.extract_stack()", "traceback.extract_stack"),
    ("def f(ledger):\n    object.__setattr__(ledger, '_held', {})", "object.__setattr__ on another object"),
    ("def f():\n    return object.__subclasses__()", "__subclasses__"),
    ("import sys\ndef f():\n    return sys.modules['autograder.checks']", "sys.modules"),
    ("import gc\n", "import gc"),
    ("import ctypes\n", "import ctypes"),
    ("from ctypes import pythonapi\n", "import ctypes"),
    ("def f(x):\n    return getattr(x, 'f_back')", "'f_back'"),
    ("%time x = __import__('sys')._getframe(0)", "_getframe"),
    ("%%timeit\nimport inspect\ninspect.stack()", "inspect.stack"),
]

NOT_FLAGGED = [
    "class A:\n    def __init__(self):\n        object.__setattr__(self, 'x', 1)",
    "import torch\ndef f(xs):\n    return torch.stack(xs)",
    "import inspect\ndef f(fn):\n    return inspect.signature(fn)",
    "import sys\nprint(sys.version)",
    "def f(self):\n    return self.__dict__",
    "def f(:\n    sys._getframe(",           # does not parse: the graders report that, not the scan
]


@pytest.mark.parametrize("src, reason", FLAGGED, ids=[r for _, r in FLAGGED])
def test_introspection_is_named(src, reason):
    found = preflight.introspection_in(src)
    assert any(reason in f for f in found), found


@pytest.mark.parametrize("src", NOT_FLAGGED)
def test_ordinary_code_is_not_flagged(src):
    assert preflight.introspection_in(src) == []


def _cells(path):
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return [preflight._src(c) for c in cells if c.get("cell_type") == "code"]


def test_no_solution_release_or_variant_is_flagged():
    notebooks = sorted(ROOT.glob("solutions/lab*/*.ipynb")) + sorted(ROOT.glob("labs/lab*/*.ipynb")) + \
        sorted(ROOT.glob("labs/zh/lab*/*.ipynb"))
    variants = sorted(ROOT.glob("autograder/variants/lab*/*.py"))
    assert len(notebooks) >= 16 and any(p.name.startswith("correct_") for p in variants), (notebooks, variants)
    flagged = {f"{p.relative_to(ROOT)} cell {i}": found for p in notebooks for i, src in enumerate(_cells(p))
               if (found := preflight.introspection_in(src))}
    flagged.update({str(p.relative_to(ROOT)): found for p in variants
                    if (found := preflight.introspection_in(p.read_text(encoding="utf-8")))})
    assert not flagged, flagged


def _attack_notebook(tmp_path, name="lab05_ledger_frame_walk"):
    from autograder.tests.submissions import from_source, write
    src = (MEASURES / f"{name}.py").read_text(encoding="utf-8")
    return write(from_source("lab05", src), tmp_path / f"{name}.ipynb")


def test_the_frame_walk_attack_is_flagged_in_record_csv_and_preflight(tmp_path):
    from autograder.isolation import prepare
    nb = _attack_notebook(tmp_path)
    sub = prepare(nb, "lab05")
    review = preflight.review_of(sub)
    assert review and all(r.startswith("cell `") for r in review)
    assert any("sys._getframe" in r and "f_locals" in r for r in review), review
    # the record carries it, with the score the grading gave
    from types import SimpleNamespace
    graded = SimpleNamespace(lab="lab05", harness_error=None, score=3.0, max_score=4.0, problems=[], tests=[],
                             output="", restarts=0, seconds=1.0, sandbox="test")
    rec = reports.record("bob", sub, graded, version="v")
    assert rec["review"] == review and rec["score"] == 3.0
    # the class CSV has a column for it (empty for a clean record)
    clean = {"student": "ada", "lab": "lab05", "score": 3.0, "max_score": 4.0, "tests": [], "status": "graded",
             "grader_version": "v", "review": []}
    flagged = dict(clean, student="bob", review=review)
    import csv
    import io
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(reports.class_csv([clean, flagged], [])))}
    assert rows["ada"]["review"] == "" and "sys._getframe" in rows["bob"]["review"]
    assert rows["ada"]["score"] == rows["bob"]["score"] == "3"
    # the student's feedback never mentions it
    assert "_getframe" not in reports.feedback_markdown(flagged)
    # preflight lists it as a line to review, not as a problem
    f = preflight.check_notebook(nb, "lab05")
    assert f.review and not any("introspection" in p for p in f.problems), (f.review, f.problems)
    text = preflight.report([f], "lab05")
    assert "REVIEW  introspection in cell" in text and "1 to review by hand" in text


def test_the_batch_summary_names_the_students_to_review(tmp_path):
    from autograder.batch import Summary
    s = Summary("lab05", tmp_path, review={"bob": ["cell `x`: sys._getframe"]})
    assert "1 student(s) to review by hand" in s.line() and s.line().endswith("bob")
    assert "review" not in Summary("lab05", tmp_path).line()


def test_an_honest_submission_has_no_review(tmp_path):
    from autograder.isolation import prepare
    from autograder.tests.submissions import release, write
    nb = write(release("lab05"), tmp_path / "stub.ipynb")
    assert preflight.review_of(prepare(nb, "lab05")) == []
    assert preflight.check_notebook(nb, "lab05").review == []


# ---------------------------------------------------------------- the ledger's second count

class _Pool:
    def __init__(self, allocator, num_blocks):
        self.allocator, self.num_blocks = allocator, num_blocks


class _Allocator:
    """Hands out 0, 1, 2, ...; with `walk`, takes the ids it hands out out of its caller's count."""

    def __init__(self, walk=False):
        self.next, self.walk = 0, walk

    @property
    def num_free(self):
        return 99                                  # a lie: the ledger's count wins

    def allocate(self, n):
        got = list(range(self.next, self.next + n))
        self.next += n
        if self.walk:
            caller = sys._getframe(1).f_locals["self"]
            self.victim = caller
        return got

    def free(self, ids):
        pass


def test_the_ledger_counts_honest_calls():
    pool = audited(_Pool(_Allocator(), 8))
    a = pool.allocator.allocate(3)
    pool.allocator.free(a[:1])
    assert ledger_counts(pool) == {"num_free": 6, "num_used": 2, "high_water": 3}


@pytest.mark.parametrize("tamper", ["clear", "pop", "replace", "lower_high_water"])
def test_a_change_to_the_ledgers_count_fails_the_case(tamper):
    pool = audited(_Pool(_Allocator(walk=True), 8))
    pool.allocator.allocate(3)
    ledger = pool.allocator.victim                 # found one frame up, as the attack does
    assert type(ledger) is Ledger
    if tamper == "clear":
        ledger._held.clear()
    elif tamper == "pop":
        ledger._held.pop(1)
    elif tamper == "replace":
        object.__setattr__(ledger, "_held", {})
    else:
        object.__setattr__(ledger, "_most", 0)
    with pytest.raises(Fail, match="count of this pool's blocks was changed"):
        ledger_counts(pool)


def test_replacing_ledger_counts_on_the_class_changes_nothing(monkeypatch):
    pool = audited(_Pool(_Allocator(), 8))
    pool.allocator.allocate(2)
    monkeypatch.setattr(Ledger, "counts", lambda self: {"num_free": 8, "num_used": 0, "high_water": 0})
    assert ledger_counts(pool)["num_used"] == 2


@pytest.mark.slow
def test_the_frame_walk_scores_no_more_than_the_leak_in_the_sandbox(tmp_path):
    """measures/lab05_ledger_frame_walk next to measures/lab05_leak on run_request's test,
    in the real sandboxed child (the walk scored 18/18 there before the second count)."""
    from autograder.core import get_tests
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    test = get_tests("lab05")["run_request_releases_on_every_ending"]
    got = {}
    with Runtime("lab05") as rt:
        for name in ("lab05_leak", "lab05_ledger_frame_walk"):
            g = grade_isolated(prepare(_attack_notebook(tmp_path, name), "lab05"), rt, tests=[test],
                               limits=Limits(timeout=600, test_timeout=300, case_timeout=120))
            assert not g.harness_error, g.problems
            got[name] = g.tests[0]
    walk, leak = got["lab05_ledger_frame_walk"], got["lab05_leak"]
    assert walk.score <= leak.score < test.points, (walk.score, leak.score)
    assert any("was changed while your code ran" in (c.message or "") for c in walk.cases), \
        [c.message for c in walk.cases]
