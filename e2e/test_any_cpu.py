"""The same grades on any CPU, simulated on this one: the solutions of the labs that run the tiny
model (04, 05, 07) get full marks from the standalone grader under every CPU kernel set this
machine has (ATEN_CPU_CAPABILITY for torch's vectorised kernels, MKL_ENABLE_INSTRUCTIONS and
MKL_CBWR for its matrix products), each grading run a fresh process whose sandboxed child gets
the same setting (autograder/isolation/driver.KERNEL_ENV). What this cannot show, ARM and GPUs,
the README says; tests/test_cpu_kernels.py measures the differences themselves."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import rounding
from autograder.isolation.driver import KERNEL_ENV
from autograder.tests.submissions import solution

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = [{"ATEN_CPU_CAPABILITY": cap} for cap in rounding.capabilities()] + \
           [{"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, {"MKL_CBWR": "COMPATIBLE"}]


@pytest.mark.parametrize("lab", ["lab04", "lab05", "lab07"])
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_the_solution_gets_full_marks_on_every_cpu_kernel_set(lab, setting, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(solution(lab), subs / "solution.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_ENV} | setting
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--lab", lab,
                        "--out", str(tmp_path / "out"), "--workers", "1", "--quiet"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    rec = json.loads((tmp_path / "out" / "students" / "solution.json").read_text(encoding="utf-8"))
    failed = [f"{t['name']}/{c['name']}" for t in rec["tests"] for c in t["cases"] if not c["passed"]]
    assert rec["score"] == rec["max_score"] and not failed, (setting, rec["score"], rec["max_score"], failed)
