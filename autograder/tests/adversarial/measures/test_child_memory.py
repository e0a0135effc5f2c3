"""No judge, test, reference or plugin function exists in the sandboxed child's memory.

A lab05 submission whose kv_bytes_per_token walks all it can reach (memscan.py: sys.modules,
the stack with every caller's globals and locals, and the heap where gc allows it) prints
what it found while a probe runs it in the real sandboxed child: nothing of the grader's
judging side. The same walk in this process, with lab05's judges imported, finds them
(so the check can fail)."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from . import memscan

HERE = Path(__file__).resolve().parent


def _scan_here():
    ns = {}
    exec(compile(memscan.SOURCE, "<memscan>", "exec"), ns)
    return ns["memscan"](limit=50_000)    # the heap (gc) already lists every function here


def test_the_walk_finds_the_judges_where_they_are_loaded():
    importlib.import_module("autograder.graders.lab05.judging")
    importlib.import_module("autograder.reference.lab05")
    seen = _scan_here()
    assert seen["heap"] == "gc"
    assert any("autograder.graders.lab05.judging." in f for f in seen["found"]), seen["found"][:20]
    assert any("autograder.reference.lab05." in f for f in seen["found"])
    assert "autograder.graders.lab05.judging" in seen["modules"]


@pytest.mark.slow
def test_the_sandboxed_child_holds_no_judge_test_or_reference(tmp_path):
    from autograder.core import get_tests
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    from autograder.tests.submissions import from_source, write
    code = (HERE / "lab05_memscan.py").read_text(encoding="utf-8").replace("# MEMSCAN_SOURCE", memscan.SOURCE)
    nb = write(from_source("lab05", code), tmp_path / "lab05.ipynb")
    tests = [get_tests("lab05")["kv_bytes_per_token_counts_kv_heads"]]
    with Runtime("lab05") as rt:
        g = grade_isolated(prepare(nb, "lab05"), rt, tests=tests,
                           limits=Limits(timeout=300, test_timeout=120, case_timeout=60))
    lines = [ln for ln in g.output.splitlines() if ln.startswith("MEMSCAN ")]
    assert lines, g.output[-2000:] + "\n" + "\n".join(g.problems)
    seen = json.loads(lines[0][len("MEMSCAN "):])
    assert seen["visited"] > 100_000, seen             # the walk really went through the child
    print("child walk:", {k: v for k, v in seen.items()})
    assert seen["found"] == [] and seen["modules"] == [], seen
    assert seen["heap"] == "PermissionError"          # and the heap itself cannot be listed there
    assert g.score == g.max_score                     # the solution's answers, scanned or not
