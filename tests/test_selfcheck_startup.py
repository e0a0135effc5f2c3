"""What makes `python -m autograder check` start fast, without changing what it checks.

Timings live in benchmarks/bench_selfcheck.py; these tests pin the behaviour: the header
comes first, the shipped model is warmed only for the labs whose graders use it, and the
command line never imports jsonschema's IRI grammar.
"""
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.selfcheck import WARM_MODEL_CELL, loads_shipped_model, warm_up

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_labs_that_run_the_tiny_model_warm_it():
    assert [lab for lab in ("lab00", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07")
            if loads_shipped_model(lab)] == ["lab04", "lab05", "lab07"]


def test_warm_up_adds_one_trusted_cell_and_loads_the_parents_copy():
    rt = SimpleNamespace(warm_cells=["import torch"])
    thread = warm_up("lab05", rt)
    assert isinstance(thread, threading.Thread)
    thread.join(timeout=600)
    assert rt.warm_cells == ["import torch", WARM_MODEL_CELL]
    again = warm_up("lab05", rt)
    again.join(timeout=600)
    assert rt.warm_cells == ["import torch", WARM_MODEL_CELL], "the cell is added once"
    from autograder.checks import shipped_model
    assert shipped_model.cache_info().currsize == 1, "the judges' copy is loaded"


def test_labs_without_the_model_start_nothing():
    rt = SimpleNamespace(warm_cells=[])
    assert warm_up("lab01", rt) is None and rt.warm_cells == []


def test_the_command_line_does_not_import_the_iri_grammar():
    code = ("import sys, autograder.cli, nbformat, jsonschema\n"
            "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


@pytest.mark.slow
def test_check_prints_its_header_first_and_passes_a_lab_that_runs_the_model():
    p = subprocess.run([sys.executable, "-m", "autograder", "check", "solutions/lab04/lab04.ipynb", "--lang", "en"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stderr.splitlines()[0].startswith("Checking "), p.stderr[:500]
    assert "lab04: 8/8 visible checks passed" in p.stdout
