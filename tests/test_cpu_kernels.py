"""Other CPUs, simulated on this one: the model-derived values the graders compare stay within
their tolerance whichever CPU kernels compute them.

torch picks its vectorised kernels by instruction set (ATEN_CPU_CAPABILITY forces a lower one)
and its matrix products go through MKL (MKL_ENABLE_INSTRUCTIONS caps the instruction set,
MKL_CBWR=COMPATIBLE picks MKL's conditional-reproducibility path). Each setting is what a
learner's laptop or a grading container with another CPU would run. `python -m autograder.rounding`
is run under every setting this machine has, on one thread (as the graders run) and on two: the
values kept in autograder/graders/labNN/_expected.pt against a fresh computation, and lab07's
batched rows against each solo run, must stay within LOGIT_ATOL. e2e/test_any_cpu.py grades the
solutions under the same settings.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autograder import rounding

ROOT = Path(__file__).resolve().parents[1]


def settings() -> list[tuple[dict, int]]:
    """(environment, threads): each capability on one thread (as the graders run), the highest on two
    as well, and MKL's two knobs."""
    caps = rounding.capabilities()
    out = [({"ATEN_CPU_CAPABILITY": cap}, 1) for cap in caps] + [({"ATEN_CPU_CAPABILITY": caps[-1]}, 2)]
    out += [({"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, 1), ({"MKL_CBWR": "COMPATIBLE"}, 1)]
    return out


def _measure(env: dict, threads: int) -> tuple[int, dict | str]:
    from autograder.isolation.driver import KERNEL_ENV
    clean = {k: v for k, v in os.environ.items() if k not in (*KERNEL_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    p = subprocess.run([sys.executable, "-m", "autograder.rounding", "--threads", str(threads)], cwd=ROOT,
                       env={**clean, **env}, capture_output=True, text=True, timeout=300)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, p.stdout + p.stderr[-2000:]


@pytest.mark.slow
def test_every_cpu_kernel_set_stays_within_the_rounding_budget():
    runs = settings()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda s: _measure(*s), runs))
    report = []
    for (env, threads), (rc, out) in zip(runs, results):
        assert isinstance(out, dict), f"{env}, {threads} thread(s): no result:\n{out}"
        if "ATEN_CPU_CAPABILITY" in env:       # the setting took effect
            assert out["capability"].lower() == env["ATEN_CPU_CAPABILITY"], (env, out["capability"])
        assert out["threads"] == threads
        report.append(f"{env} threads={threads}: worst {out['worst']:.3g}")
        over = {k: v for k, v in {**out["kept_logits"], **out["batched_rows"]}.items() if v > rounding.LOGIT_ATOL}
        assert rc == 0 and not over, f"{env}, {threads} thread(s): over LOGIT_ATOL={rounding.LOGIT_ATOL}: {over}"
    print("\n".join(report))


def test_the_capabilities_listed_are_this_cpus():
    import torch
    caps = rounding.capabilities()
    assert caps[0] == "default" and caps[-1] == torch.backends.cpu.get_cpu_capability().lower()


def test_rounding_refuses_a_thread_count_below_one_by_name():
    p = subprocess.run([sys.executable, "-m", "autograder.rounding", "--threads", "0"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--threads must be at least 1, got 0" in p.stderr and "Traceback" not in p.stderr


def test_the_grading_child_is_given_the_kernel_settings_and_nothing_else(monkeypatch):
    """An instructor who pins the grading process to a kernel set pins the student's child too."""
    from autograder.isolation.driver import Runtime
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("L2FT_NOT_PASSED_ON", "1")
    with Runtime("lab00") as rt:
        z = rt.zygote(0)
        env = dict(kv.split("=", 1) for kv in Path(f"/proc/{z.proc.pid}/environ").read_text().split("\0") if "=" in kv)
    assert env.get("ATEN_CPU_CAPABILITY") == "default" and env.get("MKL_CBWR") == "COMPATIBLE"
    assert "L2FT_NOT_PASSED_ON" not in env and "MKL_ENABLE_INSTRUCTIONS" not in env
