"""The child-process harness gives the same verdicts as the in-process graders, tells the
child nothing but which case to run, and agrees with the real nbgrader.

Fast: lab00's solution, release and every variant, isolated vs in-process, case by case;
the protocol (what the child is told); the sandbox settings.
Standalone vs the real `nbgrader autograde` for every lab: e2e/test_nbgrader_pipeline.py (`make e2e`)
(it shares one nbgrader run with the pipeline test).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder import isolation
from autograder.isolation import driver
from autograder.batch import Entry, grade_batch
from autograder.core import get_tests, run_test
from autograder.isolation import Limits, Runtime, Sandbox, grade_isolated, prepare
from autograder.tests.submissions import from_variant, solution, write

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
    full = sum(t.points for t in get_tests("lab00").values())
    assert recs["solution"]["score"] == recs["solution"]["max_score"] == full
    assert recs["release"]["score"] == 0
    for name, rec in recs.items():
        if name.startswith("bug_"):
            assert rec["score"] < full, name
        assert rec["sandbox"]["audit_hook"] and rec["restarts"] == 0
        assert rec["sandbox"]["weak"] is Sandbox.detect().weak


def test_the_child_is_told_only_which_case_to_run(tmp_path, monkeypatch):
    """The init file holds cells, limits and paths; every request names a test and a case
    (and, for a lab of pytest graders, the probe and its plain arguments: fixture names).
    Expected values (computed by judges in this process) never appear in either."""
    sent, inits = [], []
    orig_send, orig_init = driver._ChildProcess.send, driver._ChildProcess.init_payload

    def spy_send(self, msg):
        sent.append(dict(msg))
        return orig_send(self, msg)

    def spy_init(self, skip):
        payload = orig_init(self, skip)
        inits.append(payload)
        return payload

    monkeypatch.setattr(driver._ChildProcess, "send", spy_send)
    monkeypatch.setattr(driver._ChildProcess, "init_payload", spy_init)
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(solution("lab00"), "lab00"), rt)
    assert g.score == g.max_score == sum(t.points for t in get_tests("lab00").values())
    requests = [m for m in sent if m.get("t") != "protocol" and "cells" not in m]
    assert {k for m in requests for k in m} <= {"t", "test", "case", "req", "probe", "args", "kwargs"}
    calls = {c.name: c.call for t in get_tests("lab00").values() for c in t.cases}
    for m in requests:
        if "probe" in m:
            assert (m["probe"], m["args"], m["kwargs"]) == tuple(calls[m["case"]])
            assert all(type(a) is str for a in m["args"]), "probe arguments name inputs; they hold no values"
    assert [m["case"] for m in requests if m["t"] == "probe"] == [c.name for t in get_tests("lab00").values()
                                                                  for c in t.cases]
    assert set(inits[0]) == {"protocol", "nonce", "memory", "file_size", "cpu", "cells"}
    blob = json.dumps(inits[0])
    assert "reference" not in blob and str(ROOT) not in blob, "no host paths, nothing of the reference"
    for cell in inits[0]["cells"]:
        assert set(cell) == {"id", "kind", "source", "trusted"}


def test_the_staged_runtime_has_no_grader_no_reference_and_no_answers(tmp_path):
    """The sandbox's /grader holds the course library and datasets only: no autograder
    package at all (graders reach the zygote from memory), and no course module that holds
    the answers of the lab being graded or of a later one."""
    with Runtime("lab02") as rt:
        assert not (rt.stage / "autograder").exists()
        assert (rt.stage / "datasets" / "fixtures" / "peaked.json").is_file()
        assert (rt.stage / "course" / "fixtures.py").is_file()
        for name in ("sampling", "generation", "acceptance"):
            assert not (rt.stage / "course" / f"{name}.py").exists(), name
        assert "autograder.graders.lab02" in rt.modules and not any("reference" in m for m in rt.modules)
        for p in (rt.stage / "course").rglob("*.py"):
            assert not p.stat().st_mode & 0o022, f"{p} is writable by others"
    with Runtime("lab04") as rt:          # later labs use the production modules of earlier ones
        for name in ("sampling", "generation", "acceptance", "kv_cache", "decoder"):
            assert (rt.stage / "course" / f"{name}.py").is_file(), name


def test_answer_modules_are_found_by_their_marker():
    marked = isolation.answer_modules()
    assert marked["sampling"] == "lab02" and marked["generation"] == "lab03" and marked["acceptance"] == "lab03"
    assert "kv_cache" not in marked and "decoder" not in marked
    assert isolation.hidden_modules("lab01") == sorted(marked)
    assert set(isolation.hidden_modules("lab03")) >= {"generation", "acceptance"}
    assert "sampling" not in isolation.hidden_modules("lab03")
    assert not {"sampling", "generation", "acceptance"} & set(isolation.hidden_modules("lab04"))


def test_sandbox_modes(monkeypatch):
    py = Sandbox.detect("python")
    assert py.weak and py.describe()["audit_hook"] and py.describe()["os_sandbox"] is None
    with pytest.raises(isolation.WeakIsolation, match="--allow-weak-isolation"):
        py.require(allow_weak=False)
    py.require(allow_weak=True)
    monkeypatch.setenv("AUTOGRADER_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("AUTOGRADER_CONTAINER_TIER", "off")   # no fallback tier either (as root it would run)
    missing = Sandbox.detect("auto")
    assert missing.weak and "bubblewrap" in missing.reason
    with pytest.raises(ValueError, match="`sandbox` must be"):
        Sandbox.detect("docker")


def test_a_generous_but_finite_memory_limit_is_enough_for_torch(tmp_path):
    """Measured: torch + matplotlib + the lab00 probes need about 0.9 GiB of address space;
    1.5 GiB is enough, and the default (4 GiB) leaves room for transformers models."""
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(solution("lab00"), "lab00"), rt, limits=Limits(memory=int(1.5 * (1 << 30))))
    assert g.score == g.max_score, g.problems



# ---------------------------------------------------------------- one message's limit, parent side

def _feed(data: bytes, limit: int):
    """A LineReader on a pipe whose writer sends `data` (from a thread, as a child would):
    the messages it returned, whether it refused a line, and the bytes it read."""
    import os
    import threading
    from autograder.isolation.wire import LineReader, TooLarge
    r, w = os.pipe()

    def write():
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(w, view):]
        except OSError:        # the reader closed its end: as a killed child's write fails
            pass
        finally:
            os.close(w)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    reader, msgs, refused = LineReader(r, limit=limit), [], False
    try:
        while not reader.eof:
            reader.fill()
            while (m := reader.pop()) is not None:
                msgs.append(m)
    except TooLarge:
        refused = True
    finally:
        os.close(r)
        t.join(10)
    return msgs, refused, reader.total


def test_the_parent_reads_no_more_than_about_one_message_of_a_63_mib_line():
    """Counted in bytes, not seconds: a 63 MiB line, with or without its newline, is refused
    once the limit is buffered; the reader has read at most the limit plus one chunk."""
    from autograder.isolation import MAX_MESSAGE
    from autograder.isolation.wire import LineReader
    small = json.dumps({"t": "answer", "obs": 1}).encode() + b"\n"
    for tail in (b"", b"\n"):
        msgs, refused, total = _feed(small + b"y" * (63 << 20) + tail, MAX_MESSAGE)
        assert msgs == [{"t": "answer", "obs": 1}] and refused
        assert total <= len(small) + MAX_MESSAGE + LineReader.CHUNK, f"read {total} bytes"
    at_limit = json.dumps({"obs": "z" * (MAX_MESSAGE - 20)}).encode()
    assert len(at_limit) <= MAX_MESSAGE
    msgs, refused, _ = _feed(at_limit + b"\n", MAX_MESSAGE)
    assert not refused and len(msgs[0]["obs"]) == MAX_MESSAGE - 20, "a message within the limit is read whole"
