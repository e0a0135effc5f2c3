"""The child-process harness gives the same verdicts as the in-process graders, tells the
child nothing but which case to run, and agrees with the real nbgrader.

Fast: lab00's solution, release and every variant, isolated vs in-process, case by case;
the protocol (what the child is told); the sandbox settings.
Slow: standalone vs `nbgrader autograde` (and vs in-process) for lab00 (solution, release,
every variant, the eq-cheat and monkeypatch submissions) and every other lab with
notebooks (solution, release, one bug variant; without their demo cells, which do not
change a grade but cost nbgrader minutes).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder import isolation
from autograder.batch import Entry, grade_batch
from autograder.core import get_tests, labs, run_test
from autograder.isolation import Limits, Runtime, Sandbox, grade_isolated, prepare
from autograder.tests import adversarial
from autograder.tests.submissions import (from_variant, nbgrader_autograde_many, solution, with_solution_code,
                                          without_demos, write)

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ROOT / "autograder" / "variants"


def _in_process(lab: str, nb_path: Path) -> dict:
    """Verdicts of the in-process graders for a notebook: the same cells, run one by one."""
    sub = prepare(nb_path, lab)
    ns = {"__name__": "__main__"}
    for cell in sub.cells:
        try:
            exec(compile(cell.source, f"<cell {cell.id}>", "exec"), ns)
        except BaseException:  # noqa: BLE001  (a cell may fail; the others still run)
            pass
    return {name: {c.name: c.passed for c in run_test(t, ns).cases} for name, t in get_tests(lab).items()}


def _notebooks_for(lab: str, folder: Path, *, all_variants: bool) -> dict[str, Path]:
    out = {"solution": solution(lab)}
    rel = sorted((ROOT / "labs" / lab).glob("*.ipynb"))
    if rel:
        out["release"] = rel[0]
    files = sorted((VARIANTS / lab).glob("*.py"))
    bugs = [p for p in files if p.name.startswith("bug_")]
    chosen = files if all_variants else bugs[:1]
    for p in chosen:
        if p.name.startswith(("bug_", "correct_")):
            out[p.stem] = write(from_variant(lab, p), folder / f"{p.stem}" / f"{lab}.ipynb")
    return out


def _isolated(lab, nbs: dict[str, Path], out: Path, workers=2) -> dict:
    grade_batch([Entry(s, p) for s, p in nbs.items()], lab, out, workers=workers, progress=False)
    recs = {}
    for p in (out / "students").glob("*.json"):
        rec = json.loads(p.read_text())
        recs[rec["student"]] = rec
    return recs


def _compare(lab, nbs, recs):
    for student, nb in nbs.items():
        rec = recs[student]
        assert rec["status"] == "graded", (student, rec["problems"])
        want = _in_process(lab, nb)
        got = {t["name"]: {c["name"]: c["passed"] for c in t["cases"]} for t in rec["tests"]}
        assert got == want, f"{lab}/{student}: isolated verdicts differ from in-process ones\n{got}\n{want}"


# ---------------------------------------------------------------- fast

def test_lab00_isolated_verdicts_equal_in_process_ones(tmp_path):
    nbs = _notebooks_for("lab00", tmp_path / "subs", all_variants=True)
    recs = _isolated("lab00", nbs, tmp_path / "out")
    _compare("lab00", nbs, recs)
    assert recs["solution"]["score"] == recs["solution"]["max_score"] == 5
    assert recs["release"]["score"] == 0
    for name, rec in recs.items():
        if name.startswith("bug_"):
            assert rec["score"] < 5, name
        assert rec["sandbox"]["audit_hook"] and rec["restarts"] == 0


def test_the_child_is_told_only_which_case_to_run(tmp_path, monkeypatch):
    """The init file holds cells, limits and paths; every request names a test and a case.
    Expected values (computed by judges in this process) never appear in either."""
    sent, inits = [], []
    orig_send, orig_init = isolation._ChildProcess.send, isolation._ChildProcess.init_payload

    def spy_send(self, msg):
        sent.append(dict(msg))
        return orig_send(self, msg)

    def spy_init(self, skip):
        payload = orig_init(self, skip)
        inits.append(payload)
        return payload

    monkeypatch.setattr(isolation._ChildProcess, "send", spy_send)
    monkeypatch.setattr(isolation._ChildProcess, "init_payload", spy_init)
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(solution("lab00"), "lab00"), rt)
    assert g.score == 5
    assert {k for m in sent for k in m} <= {"t", "test", "case", "req"}
    assert [m["case"] for m in sent if m["t"] == "probe"] == [c.name for t in get_tests("lab00").values()
                                                              for c in t.cases]
    assert set(inits[0]) == {"protocol", "lab", "nonce", "stage", "scratch", "cmd_fd", "res_fd", "ppid", "uid",
                             "hide", "expose", "ctl", "deny", "memory", "file_size", "cpu", "cells"}
    blob = json.dumps(inits[0])
    assert "reference" not in blob.replace("autograder/reference", "")  # only as a denied path
    for cell in inits[0]["cells"]:
        assert set(cell) == {"id", "kind", "source", "trusted"}


def test_the_staged_runtime_has_no_reference_and_is_read_only(tmp_path):
    with Runtime("lab00") as rt:
        ag = rt.stage / "autograder"
        assert (ag / "core.py").is_file() and (ag / "graders" / "lab00.py").is_file()
        assert not (ag / "reference").exists() and not (ag / "variants").exists() and not (ag / "tests").exists()
        assert (rt.stage / "datasets" / "fixtures" / "peaked.json").is_file()
        assert oct((ag).stat().st_mode & 0o777) == "0o700"
        for p in (rt.stage / "course").rglob("*.py"):
            assert not p.stat().st_mode & 0o022, f"{p} is writable by others"
        denied = rt.denied_paths()
        assert str((ROOT / "autograder").resolve()) in denied and str(ag) in denied
        for h in rt.hidden_paths():
            assert not Path(sys.prefix).resolve().is_relative_to(h), "the interpreter must stay visible"


def test_sandbox_modes():
    py = Sandbox.detect("python")
    assert py.uid_base is None and not py.mount_ns and py.describe()["audit_hook"]
    auto = Sandbox.detect("auto")
    if os.geteuid() != 0:
        assert auto.uid_base is None and not auto.mount_ns
    with pytest.raises(ValueError, match="`sandbox` must be"):
        Sandbox.detect("docker")


def test_a_generous_but_finite_memory_limit_is_enough_for_torch(tmp_path):
    """Measured: torch + matplotlib + the lab00 probes need about 0.9 GiB of address space;
    1.5 GiB is enough, and the default (4 GiB) leaves room for transformers models."""
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(solution("lab00"), "lab00"), rt, limits=Limits(memory=int(1.5 * (1 << 30))))
    assert g.score == 5, g.problems


# ---------------------------------------------------------------- slow: every lab

def _labs_with_notebooks():
    return [lab for lab in labs() if list((ROOT / "solutions" / lab).glob("*.ipynb"))
            and list((ROOT / "labs" / lab).glob("*.ipynb"))]


@pytest.mark.slow
def test_standalone_agrees_with_nbgrader(tmp_path):
    """Same submissions, two harnesses, the same points for every graded cell. Also
    records what nbgrader gives the adversarial `monkeypatch` submission (it replaces
    autograder.kernel.grade in the kernel): see the printed table."""
    t0 = time.monotonic()
    plan = {}
    for lab in _labs_with_notebooks():
        nbs = _notebooks_for(lab, tmp_path / "subs" / lab, all_variants=(lab == "lab00"))
        if lab != "lab00":   # demo cells do not change a grade; nbgrader runs faster without them
            nbs = {s: write(without_demos(nbformat.read(str(p), as_version=4)),
                            tmp_path / "lean" / lab / s / p.name) for s, p in nbs.items()}
        if lab == "lab00":
            for name in ("eq_cheat", "monkeypatch"):
                src = adversarial.sources()[name].read_text()
                nbs[f"adv_{name}"] = write(with_solution_code("lab00", {}, first=src),
                                           tmp_path / "subs" / lab / f"adv_{name}" / "lab00.ipynb")
        plan[lab] = nbs
    # two scratch courses (one per core), each graded by one nbgrader autograde over its labs
    order = sorted(plan, key=lambda lab: -len(plan[lab]))
    halves = [{}, {}]
    for lab in order:
        min(halves, key=lambda h: sum(len(v) for v in h.values()))[lab] = plan[lab]
    waits = [nbgrader_autograde_many(h, tmp_path / f"nbgrader{i}", start_only=True)
             for i, h in enumerate(halves) if h]
    standalone = {lab: _isolated(lab, nbs, tmp_path / "standalone" / lab, workers=1) for lab, nbs in plan.items()}
    nbg = {}
    for wait in waits:
        nbg.update(wait())
    for lab, nbs in plan.items():   # the isolated verdicts are the in-process ones, case by case
        _compare(lab, {s: p for s, p in nbs.items() if not s.startswith("adv_")}, standalone[lab])
    table = []
    for lab, nbs in plan.items():
        for student in nbs:
            mine = {t["name"]: t["score"] for t in standalone[lab][student]["tests"]}
            theirs = nbg[lab][student]
            table.append((lab, student, sum(mine.values()), sum(theirs.values())))
            if student == "adv_monkeypatch":
                assert sum(mine.values()) == 0
                continue
            assert set(theirs) == set(mine), f"{lab}: graded cells {sorted(theirs)} != tests {sorted(mine)}"
            for name in mine:
                assert mine[name] == pytest.approx(theirs[name]), \
                    f"{lab}/{student}/{name}: standalone {mine[name]} != nbgrader {theirs[name]}"
            if student == "adv_eq_cheat":
                assert sum(theirs.values()) == 0, "nbgrader's in-kernel path must not credit the eq-cheat"
    print(f"\nstandalone vs nbgrader ({time.monotonic() - t0:.0f} s):")
    for row in table:
        print("  %-6s %-40s standalone %6g  nbgrader %6g" % row)
