"""Batch grading: student ids from paths or a roster, parallel workers, atomic per-student
results, resuming after SIGKILL without regrading or duplicating anyone, --force."""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import reports
from autograder.core import get_tests
from autograder.batch import JOURNAL, record_mac, signed
from autograder.batch import BatchError, discover, grade_batch, student_of
from autograder.release import nbgrader_env
from autograder.tests.submissions import from_variant, solution, write

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "labs" / "lab00" / "lab00.ipynb"
BUGS = sorted((ROOT / "autograder" / "variants" / "lab00").glob("bug_*.py"))


def _class(folder: Path, n: int) -> dict[str, int]:
    """n students in DIR/<student>/lab00.ipynb; returns their expected scores."""
    expected = {}
    for i in range(n):
        sid = f"s{i:02d}"
        kind = i % 3
        if kind == 0:
            (folder / sid).mkdir(parents=True)
            shutil.copy(solution("lab00"), folder / sid / "lab00.ipynb")
            expected[sid] = sum(t.points for t in get_tests("lab00").values())
        elif kind == 1:
            (folder / sid).mkdir(parents=True)
            shutil.copy(RELEASE, folder / sid / "lab00.ipynb")
            expected[sid] = 0
        else:
            write(from_variant("lab00", BUGS[i % len(BUGS)]), folder / sid / "lab00.ipynb")
            expected[sid] = None
    return expected


# ---------------------------------------------------------------- finding students

def test_student_ids_from_the_usual_layouts(tmp_path):
    (tmp_path / "a" / "alice").mkdir(parents=True)
    (tmp_path / "a" / "alice" / "lab00.ipynb").write_text("{}")
    (tmp_path / "a" / "bob.ipynb").write_text("{}")
    (tmp_path / "a" / "carol" / "lab00").mkdir(parents=True)
    (tmp_path / "a" / "carol" / "lab00" / "lab00.ipynb").write_text("{}")
    (tmp_path / "a" / "alice" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "a" / "alice" / ".ipynb_checkpoints" / "lab00-checkpoint.ipynb").write_text("{}")
    got = {e.student: e.path.relative_to(tmp_path / "a").as_posix() for e in discover([tmp_path / "a"], "lab00")}
    assert got == {"alice": "alice/lab00.ipynb", "bob": "bob.ipynb", "carol": "carol/lab00/lab00.ipynb"}
    assert student_of(tmp_path / "x" / "dave" / "lab00" / "lab00.ipynb", "lab00") == "dave"
    assert student_of(tmp_path / "eve.ipynb", "lab00") == "eve"


def test_two_notebooks_for_one_student_is_an_error_unless_one_is_named_after_the_lab(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "draft.ipynb").write_text("{}")
    (tmp_path / "alice" / "final.ipynb").write_text("{}")
    with pytest.raises(BatchError, match="several notebooks for the same student"):
        discover([tmp_path], "lab00")
    (tmp_path / "alice" / "lab00.ipynb").write_text("{}")
    (tmp_path / "alice" / "final.ipynb").unlink()
    [e] = discover([tmp_path], "lab00")
    assert e.path.name == "lab00.ipynb"


def test_roster_maps_files_to_ids(tmp_path):
    (tmp_path / "subs").mkdir()
    for name in ("x1.ipynb", "x2.ipynb"):
        (tmp_path / "subs" / name).write_text("{}")
    roster = tmp_path / "roster.csv"
    roster.write_text("file,student_id\nx1.ipynb,u1001\nx2.ipynb,u1002\n")
    assert [e.student for e in discover([tmp_path / "subs"], "lab00", roster)] == ["u1001", "u1002"]
    roster.write_text("file,student_id\nx1.ipynb,u1001\n")
    with pytest.raises(BatchError, match="not in the roster"):
        discover([tmp_path / "subs"], "lab00", roster)
    with pytest.raises(BatchError, match="cannot be read"):
        discover([tmp_path / "subs"], "lab00", tmp_path / "missing.csv")
    with pytest.raises(BatchError, match="does not exist"):
        discover([tmp_path / "nope"], "lab00")


def test_write_atomic_replaces_whole_files(tmp_path):
    p = tmp_path / "d" / "x.json"
    reports.write_atomic(p, "one")
    reports.write_atomic(p, "two")
    assert p.read_text() == "two" and [q.name for q in p.parent.iterdir()] == ["x.json"]
    with pytest.raises(TypeError):
        reports.write_atomic(p, 3)   # a failed write leaves the old file and no temporary
    assert p.read_text() == "two" and [q.name for q in p.parent.iterdir()] == ["x.json"]


def test_odd_student_ids_get_distinct_file_names():
    a, b = reports.safe_name("a/b"), reports.safe_name("a_b")
    assert a != b and "/" not in a and reports.safe_name("alice") == "alice"


# ---------------------------------------------------------------- a killed run resumes

def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "autograder", *args], cwd=ROOT, env=nbgrader_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _records(out: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["student"]: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}


def test_sigkill_mid_batch_then_rerun_grades_everyone_exactly_once(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    expected = _class(subs, 6)
    proc = _cli("grade", str(subs), "--lab", "lab00", "--out", str(out), "--workers", "2")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        done = list((out / "students").glob("*.json")) if (out / "students").is_dir() else []
        if len(done) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the batch finished before it could be killed:\n{proc.communicate()[1][-2000:]}"
    children = _children(proc.pid)
    assert children, "grading children were running when the batch was killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    first = {p.name: p.stat().st_mtime_ns for p in (out / "students").glob("*.json")}
    assert 2 <= len(first) < 6, "the kill must land mid-batch"
    for p in (out / "students").glob("*.json"):
        json.loads(p.read_text())      # every record on disk is complete
    for _ in range(100):               # children die with their parent (PR_SET_PDEATHSIG)
        if not [c for c in children if Path(f"/proc/{c}").exists()]:
            break
        time.sleep(0.1)
    assert not [c for c in children if Path(f"/proc/{c}").exists()], "orphaned grading children"

    rerun = _cli("grade", str(subs), "--lab", "lab00", "--out", str(out), "--workers", "2", "--resume")
    stdout, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr[-3000:]
    assert f"up to date {len(first)}" in stdout and f"graded {6 - len(first)}" in stdout, stdout
    assert "grading lab00" in stderr, "tqdm progress bar on stderr"
    after = {p.name: p.stat().st_mtime_ns for p in (out / "students").glob("*.json")}
    assert len(after) == 6
    assert all(after[n] == t for n, t in first.items()), "finished students were not regraded"
    recs = _records(out)
    assert sorted(recs) == sorted(expected)
    for sid, score in expected.items():
        if score is not None:
            assert recs[sid]["score"] == score, (sid, recs[sid]["problems"])
        assert (out / "feedback" / f"{sid}.md").is_file()
        assert (out / "gradescope" / sid / "results.json").is_file()
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert sorted(r["student_id"] for r in rows) == sorted(expected), "each student exactly once"
    assert not [p for p in out.rglob("*.tmp")], "no temporary files left behind by the finished run"


class _Died(Exception):
    pass


def _die(rec):
    """on_record that ends the batch with an exception, as ^C would: records written so far
    stay, the class CSV is not rebuilt, and the journal stays."""
    raise _Died(rec["student"])


def _journal_key(out: Path) -> bytes:
    return bytes.fromhex(json.loads((out / JOURNAL).read_text())["key"])


def test_force_and_grader_version_and_resubmission(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "ann").mkdir(parents=True)
    (subs / "ben").mkdir(parents=True)
    shutil.copy(solution("lab00"), subs / "ann" / "lab00.ipynb")
    shutil.copy(RELEASE, subs / "ben" / "lab00.ipynb")
    entries = discover([subs], "lab00")
    with pytest.raises(_Died):
        grade_batch(entries, "lab00", out, workers=1, progress=False, on_record=_die)
    assert (out / JOURNAL).stat().st_mode & 0o777 == 0o600, "the unfinished batch's key: the grader's alone"
    stamp = {s: r["graded_at"] for s, r in _records(out).items()}
    assert sorted(stamp) == ["ann", "ben"]

    # resuming the batch that died: a record from an older grader version is kept (and
    # reported) unless --force, the other is up to date
    p = out / "students" / "ann.json"
    rec = json.loads(p.read_text())
    rec["grader_version"] = "0000000000000000"
    rec["mac"] = record_mac(rec, _journal_key(out))      # as an older grader would have signed it
    p.write_text(json.dumps(rec))
    s2 = grade_batch(entries, "lab00", out, workers=2, progress=False, resume=True)
    assert s2.stale == ["ann"] and s2.skipped == ["ben"] and s2.graded == [] and "--force" in s2.line()
    assert not (out / JOURNAL).exists(), "a finished batch leaves no key behind"

    # a finished batch's records are never trusted again: the next run grades everyone
    time.sleep(1.1)
    s3 = grade_batch(entries, "lab00", out, workers=2, progress=False)
    assert sorted(s3.graded) == ["ann", "ben"] and not s3.skipped and not s3.stale
    recs = _records(out)
    assert all(recs[s]["graded_at"] > stamp[s] for s in stamp)
    assert recs["ann"]["grader_version"] == reports.grader_version("lab00")
    with pytest.raises(_Died):
        grade_batch(entries, "lab00", out, workers=1, progress=False, on_record=_die)
    s4 = grade_batch(entries, "lab00", out, workers=2, force=True, progress=False, resume=True)
    assert sorted(s4.graded) == ["ann", "ben"], "--force regrades a resumed batch's students too"

    # resuming: a resubmitted notebook is regraded without --force; so is a record with a grader error
    with pytest.raises(_Died):
        grade_batch(entries, "lab00", out, workers=1, progress=False, on_record=_die)
    shutil.copy(solution("lab00"), subs / "ben" / "lab00.ipynb")
    rec = json.loads((out / "students" / "ann.json").read_text())
    rec["status"] = "grader_error"
    rec["mac"] = record_mac(rec, _journal_key(out))
    (out / "students" / "ann.json").write_text(json.dumps(rec))
    s5 = grade_batch(entries, "lab00", out, workers=2, progress=False, resume=True)
    assert sorted(s5.graded) == ["ann", "ben"]
    full = sum(t.points for t in get_tests("lab00").values())
    assert _records(out)["ben"]["score"] == full
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [r["student_id"] for r in rows] == ["ann", "ben"]
    assert rows[0]["greedy_token_picks_argmax"] == f"{full:g}"


def _ben_graded(tmp_path: Path):
    """One student, ben, who submitted the unsolved release, graded once: (entries, out)."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "ben").mkdir(parents=True)
    shutil.copy(RELEASE, subs / "ben" / "lab00.ipynb")
    entries = discover([subs], "lab00")
    grade_batch(entries, "lab00", out, workers=1, progress=False)
    return entries, out


def test_a_record_without_the_graders_mac_is_regraded_and_never_counted(tmp_path):
    """Anyone who can write into grades/ can write a record; only the grader can sign one.
    A forged full-marks record (no MAC, a made-up MAC, or a signed record edited after) is
    regraded, and a forged record of a student not in the batch stays out of the CSV."""
    entries, out = _ben_graded(tmp_path)
    p = out / "students" / "ben.json"
    honest = json.loads(p.read_text())
    assert honest["score"] == 0 and isinstance(honest.get("mac"), str)
    for mac in (None, "0" * 64, honest["mac"]):
        forged = dict(honest, score=99.0)
        if mac is None:
            forged.pop("mac")
        else:
            forged["mac"] = mac
        p.write_text(json.dumps(forged))
        mallory = dict(forged, student="mallory")
        (out / "students" / "mallory.json").write_text(json.dumps(mallory))
        s = grade_batch(entries, "lab00", out, workers=1, progress=False)
        assert s.graded == ["ben"], mac
        assert json.loads(p.read_text())["score"] == 0
        rows = list(csv.DictReader((out / "grades.csv").open()))
        assert [r["student_id"] for r in rows] == ["ben"]


def test_grader_version_follows_every_file_that_decides_a_grade(tmp_path):
    """A lab's pytest package, the plugin and the isolation harness are in the hash, so a
    resumed batch regrades after any of them changes (and not after an unrelated lab's)."""
    import shutil
    root = tmp_path / "course-copy"
    (root / "autograder" / "graders" / "lab01").mkdir(parents=True)
    (root / "autograder" / "graders" / "lab02").mkdir(parents=True)
    (root / "autograder" / "isolation").mkdir(parents=True)
    for rel in ("graders/lab01/test_softmax.py", "graders/lab02/test_top_p.py", "isolation/child.py", "plugin.py"):
        (root / "autograder" / rel).write_text("# v1\n")
    shutil.copytree(reports.ROOT / "course", root / "course", ignore=shutil.ignore_patterns("__pycache__", "nbgrader"))
    before = reports.grader_version("lab01", root)
    (root / "autograder" / "graders" / "lab02" / "test_top_p.py").write_text("# v2\n")
    assert reports.grader_version("lab01", root) == before
    for rel in ("graders/lab01/test_softmax.py", "isolation/child.py", "plugin.py"):
        (root / "autograder" / rel).write_text(f"# changed {rel}\n")
        now = reports.grader_version("lab01", root)
        assert now != before, f"changing autograder/{rel} left the grader version as it was"
        before = now


def test_a_record_forged_by_a_notebook_under_nbgrader_is_regraded(tmp_path, monkeypatch):
    """`nbgrader autograde` runs a notebook's code as the instructor, so that code can read
    whatever the instructor can. The record key used to live in the instructor's home
    (~/.config/l2ft-autograder/record.key), and a notebook signed a full-marks record with it
    that the next isolated run kept as up to date. Now no key outlives a finished batch: a
    forger who signs with the old key file (readable, as it was) or with anything it finds
    in the output folder gets regraded, and the class CSV never shows its score."""
    config = tmp_path / "config"
    old_key = config / "l2ft-autograder" / "record.key"
    old_key.parent.mkdir(parents=True)
    old_key.write_text("ab" * 32)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("AUTOGRADER_RECORD_KEY_FILE", str(old_key))
    entries, out = _ben_graded(tmp_path)
    honest = _records(out)["ben"]
    assert honest["score"] == 0
    # the output folder holds no key once the batch is done (the journal went with it)
    assert not (out / JOURNAL).exists()
    for p in out.rglob("*.json"):
        assert "key" not in json.loads(p.read_text()), p
    # the old key file, as the grader used to read it (its text) and as its bytes
    keys = [old_key.read_bytes().strip(), bytes.fromhex(old_key.read_text())]
    full = sum(t.points for t in get_tests("lab00").values())
    for key in keys:
        forged = dict(honest, score=full, grader_version=reports.grader_version("lab00"))
        forged["mac"] = record_mac(forged, key)
        (out / "students" / "ben.json").write_text(json.dumps(forged))
        s = grade_batch(entries, "lab00", out, workers=1, progress=False)
        assert s.graded == ["ben"] and not s.skipped, "a forged record was kept as up to date"
        assert _records(out)["ben"]["score"] == 0
        rows = list(csv.DictReader((out / "grades.csv").open()))
        assert [float(r["score"]) for r in rows if r["student_id"] == "ben"] == [0.0], rows


def test_a_record_keeps_a_short_preview_of_a_large_value():
    """A failing case's expected and got values are kept whole up to 2 KiB of JSON; a larger
    one becomes the start of its JSON, marked as cut, so one case never makes a record large."""
    assert reports.preview([1, 2, 3]) == [1, 2, 3] and reports.preview(None) is None
    big = {"tokens": list(range(100_000))}
    cut = reports.preview(big)
    assert isinstance(cut, str) and len(cut) < reports.PREVIEW + 100
    assert cut.startswith('{"tokens": [0, 1, 2') and "(cut: " in cut and "characters in all)" in cut
    case = {"name": "c", "points": 0.0, "max_points": 1.0, "passed": False, "visible": False,
            "message": "m" * 100_000, "expected": big, "got": "x" * 10_000_000, "hint": None}
    kept = reports._bounded_case(case)
    assert len(json.dumps(kept)) < 3 * reports.PREVIEW + reports.MESSAGE + 200
    assert kept["message"].endswith("... (cut)") and case["got"] == "x" * 10_000_000, "the original is left alone"


def test_a_journal_is_trusted_only_when_the_instructor_resumes(tmp_path, capsys):
    """Code that runs as the grader's user (a notebook under `nbgrader autograde`) can write a
    journal of its own, with a key it chose, next to a full-marks record signed with that key.
    Without --resume the journal is set aside unread and everyone is graded; a batch that died
    is resumed only when asked (and then the folder's journal is trusted, as the README says)."""
    entries, out = _ben_graded(tmp_path)
    honest = _records(out)["ben"]
    full = sum(t.points for t in get_tests("lab00").values())
    key = bytes(range(32))
    (out / JOURNAL).write_text(json.dumps({"lab": "lab00", "key": key.hex(), "started_by_pid": 1}))
    forged = dict(honest, score=full)
    forged["mac"] = record_mac(forged, key)
    (out / "students" / "ben.json").write_text(json.dumps(forged))
    capsys.readouterr()
    s = grade_batch(entries, "lab00", out, workers=1, progress=False)
    assert s.graded == ["ben"] and not s.skipped and _records(out)["ben"]["score"] == 0
    assert "set aside" in capsys.readouterr().err
    assert not (out / JOURNAL).exists() and len(list(out.glob(f"{JOURNAL}.set-aside-*"))) == 1

    # a batch that really died: without --resume its journal is set aside too (everyone regraded),
    # with --resume its finished students are kept
    with pytest.raises(_Died):
        grade_batch(entries, "lab00", out, workers=1, progress=False, on_record=_die)
    stamp = _records(out)["ben"]["graded_at"]
    time.sleep(1.1)
    assert grade_batch(entries, "lab00", out, workers=1, progress=False, resume=True).skipped == ["ben"]
    assert _records(out)["ben"]["graded_at"] == stamp
    with pytest.raises(_Died):
        grade_batch(entries, "lab00", out, workers=1, progress=False, on_record=_die)
    assert grade_batch(entries, "lab00", out, workers=1, progress=False).graded == ["ben"]
