"""What makes `python -m autograder check` start fast, without changing what it checks.

Timings live in benchmarks/bench_selfcheck.py; these tests pin the behaviour: the header
comes first, the shipped model is warmed only for the labs whose graders use it, and the
command line never imports jsonschema's IRI grammar.
"""
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder import messages
from autograder.selfcheck import (VISIBLE_CASES_USE_MODEL, WARM_DECODER_CELL, WARM_MODEL_CELL, estimate,
                                  last_seconds, loads_shipped_model, model_loaders, remember_seconds,
                                  seconds_file, warm_up)

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_labs_that_run_the_tiny_model_warm_it():
    assert [lab for lab in ("lab00", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07")
            if loads_shipped_model(lab)] == ["lab04", "lab05", "lab07"]


def test_warm_up_adds_one_trusted_cell_and_loads_the_parents_copy_only_for_hidden_cases():
    from autograder.checks import shipped_decoder, shipped_model
    shipped_model.cache_clear()
    shipped_decoder.cache_clear()
    rt = SimpleNamespace(warm_cells=["import torch"])
    thread = warm_up("lab04", rt)
    assert isinstance(thread, threading.Thread)
    thread.join(timeout=600)
    assert rt.warm_cells == ["import torch", WARM_DECODER_CELL], "the visible cases need only the course's decoder"
    assert (shipped_model.cache_info().currsize, shipped_decoder.cache_info().currsize) == (0, 0), (
        "the visible judges read autograder/graders/lab04/_expected.pt")
    again = warm_up("lab04", rt, visible_only=False)
    again.join(timeout=600)
    assert rt.warm_cells == ["import torch", WARM_DECODER_CELL, WARM_MODEL_CELL], "each cell is added once"
    assert (shipped_model.cache_info().currsize, shipped_decoder.cache_info().currsize) == (1, 1), (
        "for the hidden cases the judges' copies are loaded")


def test_model_loaders_name_what_each_lab_calls():
    assert {lab: model_loaders(lab) for lab in ("lab01", "lab04", "lab05", "lab07")} == {
        "lab01": [], "lab04": ["shipped_model", "shipped_decoder"], "lab05": ["shipped_decoder"],
        "lab07": ["shipped_model"]}


def test_labs_whose_visible_cases_do_not_run_the_model_start_nothing():
    rt = SimpleNamespace(warm_cells=[])
    assert warm_up("lab01", rt) is None and warm_up("lab07", rt) is None and rt.warm_cells == []
    thread = warm_up("lab07", rt, visible_only=False)     # its hidden cases do
    thread.join(timeout=600)
    assert rt.warm_cells == [WARM_MODEL_CELL]


VISIBLE_CASES = """
import sys
from autograder import checks
from autograder.core import get_tests, run_test
from autograder.notebook import extract, namespace, read, release_notebook_path
lab = sys.argv[1]
ns = namespace(extract(read(f"solutions/{lab}/{lab}.ipynb"), release_notebook_path(lab)).code)
for t in get_tests(lab).values():
    run_test(t, ns, visible_only=True)
print("transformers' model:", checks.shipped_model.cache_info().currsize)
print("model loaded:", checks.shipped_decoder.cache_info().currsize)
"""


@pytest.mark.slow
@pytest.mark.parametrize("lab", ["lab00", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07"])
def test_the_warmed_labs_are_those_whose_visible_cases_run_the_model(lab):
    p = subprocess.run([sys.executable, "-c", VISIBLE_CASES, lab], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-2] == "transformers' model: 0", (
        f"{lab}'s visible cases load transformers' model: the sandbox of a self-check then imports transformers")
    used = p.stdout.strip().splitlines()[-1] == "model loaded: 1"
    assert used == (lab in VISIBLE_CASES_USE_MODEL), (
        f"{lab}'s visible cases {'use' if used else 'do not use'} the shipped model: "
        "update autograder.selfcheck.VISIBLE_CASES_USE_MODEL")


def test_the_command_line_does_not_import_the_iri_grammar():
    code = ("import sys, autograder.cli, nbformat, jsonschema\n"
            "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_the_estimate_is_the_last_check_of_the_lab_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert seconds_file().is_relative_to(tmp_path)
    assert estimate("lab05", "en") == messages.text("check.estimate_first", "en")
    remember_seconds("lab05", 6.2)
    assert last_seconds("lab05") == 6.2 and last_seconds("lab01") is None
    assert estimate("lab05", "en") == "about 7 s, as the last check of lab05 on this machine"
    assert estimate("lab05", "zh") == messages.text("check.estimate_last", "zh", seconds=7, lab="lab05")
    assert "7" in estimate("lab05", "zh") and estimate("lab01", "en") == messages.text("check.estimate_first", "en")
    seconds_file().write_text("not json")
    assert estimate("lab05", "en") == messages.text("check.estimate_first", "en")
    with pytest.raises(ValueError, match="`seconds` must be a positive number, got -1"):
        remember_seconds("lab05", -1)


@pytest.mark.slow
def test_check_prints_its_header_first_and_passes_a_lab_that_runs_the_model(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "autograder", "check", "solutions/lab04/lab04.ipynb", "--lang", "en"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    header = p.stderr.splitlines()[0]
    assert header.startswith("Checking ") and messages.text("check.estimate_first", "en") in header, p.stderr[:500]
    from autograder.core import get_tests
    visible = sum(c.visible for t in get_tests("lab04").values() for c in t.cases)
    assert visible >= 8 and f"lab04: {visible}/{visible} visible checks passed" in p.stdout, p.stdout[-2000:]
    assert (tmp_path / "logit-to-first-token" / "check-seconds.json").is_file()


def test_the_command_line_lists_the_labs_the_core_does():
    from autograder.cli import _labs
    from autograder.core import labs
    assert _labs() == labs()


ISOLATED_CHECK = """
import sys
from autograder import checks
from autograder.isolation import Runtime, Sandbox, grade_isolated, prepare
from autograder.selfcheck import warm_up
lab = sys.argv[1]
with Runtime(lab, sandbox=Sandbox.detect("auto")) as rt:
    warming = warm_up(lab, rt)
    graded = grade_isolated(prepare(f"solutions/{lab}/{lab}.ipynb", lab), rt, visible_only=True)
    warming.join()
cases = [c for t in graded.tests for c in t.cases]
print(len(cases), all(c.passed for c in cases), "transformers" in sys.modules, checks.shipped_model.cache_info().currsize)
"""


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(VISIBLE_CASES_USE_MODEL))
def test_the_grading_side_of_a_visible_check_loads_no_model(lab):
    """The sandbox runs the student's code on the model; the judges of the visible cases read
    the values kept in autograder/graders/labNN/_expected.pt, so the grading process neither
    imports transformers nor loads the model, and every visible case of the solution passes."""
    p = subprocess.run([sys.executable, "-c", ISOLATED_CHECK, lab], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    n, passed, imported, loaded = p.stdout.split()[-4:]
    assert int(n) > 0 and passed == "True"
    assert (imported, loaded) == ("False", "0"), p.stdout
