"""The standalone grader, run by an ordinary user, over the attacks on what it trusts.

`make e2e` runs as root (as CI does); graders usually do not. This test makes a throwaway
system user, gives it a folder of submissions, and runs `python -m autograder grade` as
that user, once per lab, over one attack of each kind the grader must hold against, next
to the lab's unsolved release (the stub):

    lab00  expected values or the grader's channel taken from the stack (frame_walk), the
           reference read from disk (read_reference), answer modules imported
           (answer_modules), forged verdicts printed (fake_passed), the grader's functions
           replaced (monkeypatch), a 4 MiB and a 63 MiB result (huge_result) and 63 MiB
           written into every pipe (huge_raw_write), an honest solution, and records forged
           before the grade, as code run by `nbgrader autograde` could write them: a
           full-marks record for the stub signed with the record key the grader once kept
           in the instructor's home, and one for a student who is not in the batch
    lab05  a leaking run_request told truthfully, with an allocator that lies about it, and
           with one that also finds the grader's ledger on the stack and edits it
           (measures/lab05_ledger_frame_walk),
           one-line wrappers around the course's own answers (measures/lab05_answer_wrapper),
           a function that asks the grader on its stack what it expects
           (measures/lab05_stack_judge), and a walk over the child's whole memory
           (measures/lab05_memscan)
    lab07  a late release told truthfully and with the allocator's properties lying

Each attack is held to the same expectations the root tests hold it to (the corpus's
EXPECT, test_adversarial's assertions on the batch, test_measures' leak/lie pairs,
test_child_memory's empty walk), and none scores more than the stub: the release for an
attack on the answers, the same bug told truthfully for a lie about a measurement.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.core import get_tests
from autograder.tests import adversarial
from autograder.tests.adversarial import measures, neighbours
from autograder.tests.adversarial.measures import memscan
from autograder.tests.adversarial.measures.test_measures import CASES

ROOT = Path(__file__).resolve().parents[1]
USER = "ltft-test-grader"
MEASURES = Path(measures.__file__).resolve().parent

LAB00 = ("honest", "answer_modules", "frame_walk", "read_reference", "fake_passed", "monkeypatch",
         "huge_result", "huge_raw_write")
LAB05 = ("lab05_leak", "lab05_leak_lying_allocator", "lab05_ledger_frame_walk", "lab05_answer_wrapper",
         "lab05_stack_judge", "lab05_memscan")
LAB07 = ("lab07_leak", "lab07_leak_lying_property")
LIMITS = {   # per lab: roomy, the machine running the e2e tier is often busy
    "lab00": ["--timeout", "120", "--test-timeout", "30", "--case-timeout", "15", "--cell-timeout", "30"],
    "lab05": ["--timeout", "600", "--test-timeout", "300", "--case-timeout", "120", "--cell-timeout", "120"],
    "lab07": ["--timeout", "600", "--test-timeout", "300", "--case-timeout", "120", "--cell-timeout", "120"],
}

# run as the user before the grade, the way a notebook under `nbgrader autograde` (the
# instructor's own process) could: full marks for the stub, and for someone not in the batch,
# signed with the key file the grader used to keep in the instructor's home
FORGE = r'''
import hashlib, json, os, sys
from pathlib import Path
from autograder import reports
from autograder.batch import record_mac
from autograder.core import get_tests
stub, students = Path(sys.argv[1]), Path(sys.argv[2])
key_file = Path(os.environ["AUTOGRADER_RECORD_KEY_FILE"])
key_file.parent.mkdir(parents=True, exist_ok=True)
key_file.write_text("ab" * 32)
full = sum(t.points for t in get_tests("lab00").values())
students.mkdir(parents=True, exist_ok=True)
for sid in ("stub", "mallory"):
    rec = {"student": sid, "lab": "lab00", "status": "graded", "score": full, "max_score": full,
           "tests": [], "problems": [], "restarts": 0, "seconds": 1.0, "graded_at": "2999-01-01T00:00:00+00:00",
           "grader_version": reports.grader_version("lab00"), "file": str(stub),
           "submission_sha256": hashlib.sha256(stub.read_bytes()).hexdigest(), "output_tail": ""}
    for key in (key_file.read_bytes().strip(), bytes.fromhex(key_file.read_text())):
        rec["mac"] = record_mac(rec, key)
        (students / f"{sid}.json").write_text(json.dumps(rec))
print("FORGED", sorted(p.name for p in students.iterdir()))
'''


def _remove_user() -> None:
    try:
        uid = pwd.getpwnam(USER).pw_uid
    except KeyError:
        return
    for pid in subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout.split():
        try:      # what a previous run left behind, each by its own id
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["userdel", USER], capture_output=True)


@pytest.fixture
def grader_user():
    _remove_user()
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
    try:
        yield USER
    finally:
        _remove_user()


def _show_python(script: list[str], work: Path) -> None:
    """The interpreter may live in a folder only root can enter (/root/.pyenv): in the
    command's private mount namespace, a tmpfs covers the highest such folder and the
    interpreter's own folders are put back inside it, so the user sees just those."""
    for i, p in enumerate(sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)})):
        parts = Path(p).parts
        for j in range(1, len(parts)):
            anc = str(Path(*parts[:j]))
            if not os.stat(anc).st_mode & 0o001:
                keep = f"{work}/.keep{i}"     # removed with the work folder
                script += [f"mkdir -p {keep}", f"mount --bind {p} {keep}",
                           f"mountpoint -q {anc} || mount -t tmpfs -o mode=755 ltft {anc}", f"mkdir -p {p}",
                           f"mount --move {keep} {p}"]
                break


def _submissions(work: Path) -> dict[str, dict[str, Path]]:
    from autograder.tests.submissions import from_source, release, with_solution_code, write
    subs: dict[str, dict[str, Path]] = {"lab00": {}, "lab05": {}, "lab07": {}}
    for name in LAB00:
        code = adversarial.sources()[name].read_text(encoding="utf-8")
        subs["lab00"][name] = write(with_solution_code("lab00", {}, first=code), work / "subs" / "lab00" / name / "lab00.ipynb")
    subs["lab00"]["huge_result_63"] = write(with_solution_code("lab00", {}, first=neighbours.huge_result_63_mib()),
                                            work / "subs" / "lab00" / "huge_result_63" / "lab00.ipynb")
    for lab, names in (("lab05", LAB05), ("lab07", LAB07)):
        for name in names:
            code = (MEASURES / f"{name}.py").read_text(encoding="utf-8").replace("# MEMSCAN_SOURCE", memscan.SOURCE)
            subs[lab][name] = write(from_source(lab, code), work / "subs" / lab / name / f"{lab}.ipynb")
    for lab in subs:
        subs[lab]["stub"] = write(release(lab), work / "subs" / lab / "stub" / f"{lab}.ipynb")
    return subs


def _records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}


def _by_test(rec: dict) -> dict[str, float]:
    return {t["name"]: t["score"] for t in rec["tests"]}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="makes a system user (useradd) and runs the grader as it: run as root, as `make e2e` in CI does")
def test_every_attack_scores_no_more_than_the_stub_when_an_ordinary_user_grades(grader_user):
    for tool in ("useradd", "userdel", "unshare", "setpriv", "mount"):
        if shutil.which(tool, path="/usr/sbin:/sbin:/usr/bin:/bin") is None:
            pytest.fail(f"{tool} is missing: the e2e tier needs util-linux and passwd")
    work = Path(tempfile.mkdtemp(prefix="ltft-user-grade-"))    # pytest's own tmp folders are root-only
    try:
        _run_and_check(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_and_check(work: Path) -> None:
    subs = _submissions(work)
    (work / "forge.py").write_text(FORGE)
    home = work / "home"
    home.mkdir()
    key_file = home / ".config" / "l2ft-autograder" / "record.key"
    for p in [work, *work.rglob("*")]:
        shutil.chown(p, USER, USER)
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    as_user = f"setpriv --reuid={USER} --regid={USER} --clear-groups"
    script: list[str] = []
    _show_python(script, work)
    script.append("set +e")
    script.append(f"{as_user} {sys.executable} {work}/forge.py {subs['lab00']['stub']} {work}/out/lab00/students; "
                  "echo \"FORGE_RC $?\"")
    for lab in ("lab00", "lab05", "lab07"):
        script.append(f"{as_user} {sys.executable} -m autograder grade {work}/subs/{lab} --lab {lab} "
                      f"--out {work}/out/{lab} --workers 2 --quiet {' '.join(LIMITS[lab])}; echo \"GRADE_RC {lab} $?\"")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "AUTOGRADER_RECORD_KEY_FILE": str(key_file),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", "\n".join(script)],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=1500)
    log = r.stdout[-4000:] + r.stderr[-4000:]
    assert r.returncode == 0 and "FORGE_RC 0" in r.stdout, log
    for lab in ("lab00", "lab05", "lab07"):
        assert f"GRADE_RC {lab} 0" in r.stdout, log
    got = {lab: _records(work / "out" / lab) for lab in subs}
    got["lab00"].pop("mallory", None)       # a stray file in the folder; the CSV check below is what counts
    for lab in subs:
        assert sorted(got[lab]) == sorted(subs[lab]), f"{lab}: every student has a record, and only they"
        for name, rec in got[lab].items():
            assert rec["status"] == "graded", (lab, name, rec["problems"])
            assert rec["sandbox"]["weak"] is False, f"{lab}/{name} was graded without the OS sandbox as {USER}"
            assert pwd.getpwuid((work / "out" / lab / "students" / f"{name}.json").stat().st_uid).pw_name == USER
    for lab in subs:   # shown with -s, and in the report of a failure below
        print(lab, {n: f"{r['score']:g}/{r['max_score']:g}" for n, r in sorted(got[lab].items())})
    _check_lab00(got["lab00"], work / "out" / "lab00", subs["lab00"])
    _check_lab05(got["lab05"])
    _check_lab07(got["lab07"])


def _check_lab00(recs: dict, out: Path, subs: dict) -> None:
    from autograder.tests import test_adversarial as root_tests
    stub = recs["stub"]
    graded = {"records": recs, "out": out}
    for name in LAB00:          # exactly what the root suite asserts of each attack
        root_tests.test_attack_cannot_raise_the_score(graded, name)
        if name != "honest":
            assert recs[name]["score"] <= stub["score"], (name, recs[name]["problems"])
    root_tests.test_fake_passed_lines_are_only_text(graded)
    root_tests.test_forged_messages_never_become_a_grader_error(graded)
    root_tests.test_a_result_over_the_limit_fails_its_case_and_its_record_stays_small(graded)
    big = recs["huge_result_63"]
    msgs = [c["message"] for t in big["tests"] for c in t["cases"]]
    assert big["score"] <= stub["score"] and any("the limit is 1 MiB" in m for m in msgs), msgs
    for p in (out / "students" / "huge_result_63.json", out / "feedback" / "huge_result_63.md"):
        assert p.stat().st_size < 64 * 1024, f"{p.name} is {p.stat().st_size} bytes"
    # the records forged before the grade: the stub's was regraded, mallory's never counted
    full = sum(t.points for t in get_tests("lab00").values())
    assert stub["score"] == 0 < full and stub["graded_at"] < "2999"
    assert stub["submission_sha256"] == hashlib.sha256(subs["stub"].read_bytes()).hexdigest()
    with (out / "grades.csv").open(newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == sorted(subs), "the class CSV lists the batch's students only (no mallory)"
    assert float(rows["stub"]["score"]) == 0, rows["stub"]


def _check_lab05(recs: dict) -> None:
    leak, lying, names = CASES["lab05"]
    _check_lie(recs, leak, lying, names, "lab05")
    _check_lie(recs, leak, "lab05_ledger_frame_walk", names, "lab05")
    stub = recs["stub"]
    for name in ("lab05_answer_wrapper", "lab05_stack_judge"):
        exp = adversarial.expectations(MEASURES / f"{name}.py")
        rec = recs[name]
        assert exp["no_more_than"] == "release"
        assert rec["score"] <= stub["score"], f"{name} earned {rec['score']} (the stub {stub['score']}): {rec['problems']}"
        for s in exp["output_has"]:
            assert s in rec["output_tail"], f"{name}: the attack did not run as planned (no {s!r})"
        for s in exp["output_not"]:
            assert s not in rec["output_tail"], f"{name}: {s!r} appeared\n{rec['output_tail'][-3000:]}"
    scan = [ln for ln in recs["lab05_memscan"]["output_tail"].splitlines() if ln.startswith("MEMSCAN ")]
    assert scan, recs["lab05_memscan"]["output_tail"][-2000:]
    seen = json.loads(scan[0][len("MEMSCAN "):])
    assert seen["visited"] > 100_000 and seen["found"] == [] and seen["modules"] == [], seen


def _check_lab07(recs: dict) -> None:
    leak, lying, names = CASES["lab07"]
    _check_lie(recs, leak, lying, names, "lab07")


def _check_lie(recs: dict, leak: str, lying: str, names: list[str], lab: str) -> None:
    """The lie scores no more than the same bug told truthfully, on the tests that judge the
    pool and in total, and less than full marks there (as test_measures asserts)."""
    full = {n: t.points for n, t in get_tests(lab).items()}
    told, lied = _by_test(recs[leak]), _by_test(recs[lying])
    for n in names:
        assert lied[n] <= told[n] < full[n], (lab, n, lied, told)
    assert recs[lying]["score"] <= recs[leak]["score"] < recs[leak]["max_score"], (lab, lied, told)


# ---------------------------------------------------------------- the root suite, as an ordinary user

SUITE_USER = "l2ftgrader"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="already running as an ordinary user")
def test_the_adversarial_suite_passes_as_an_ordinary_user(tmp_path):
    """autograder/tests/test_adversarial.py (its tests not marked slow), run by a user made
    with useradd: bubblewrap then makes its namespaces without any privilege. The interpreter
    may live in a folder only root can enter (/root/.pyenv): a private mount namespace shows
    the user just that interpreter."""
    if shutil.which("useradd") is None or shutil.which("unshare") is None:
        pytest.skip("needs useradd and unshare")
    if subprocess.run(["id", SUITE_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", SUITE_USER], check=True)
    home = Path(tempfile.mkdtemp(prefix="l2ft-user-"))      # pytest's own tmp folders are root-only
    os.chmod(home, 0o755)
    shutil.chown(home, SUITE_USER, SUITE_USER)
    script = []
    for p in sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}):
        parts = Path(p).parts
        for i in range(1, len(parts)):     # the highest folder others cannot enter: cover it, show p
            anc = str(Path(*parts[:i]))
            if not os.stat(anc).st_mode & 0o001:
                script += [f"mkdir -p /tmp/.l2ft-keep{i}", f"mount --bind {p} /tmp/.l2ft-keep{i}",
                           f"mount -t tmpfs -o mode=755 l2ft {anc}", f"mkdir -p {p}",
                           f"mount --move /tmp/.l2ft-keep{i} {p}"]
                break
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "AUTOGRADER_RECORD_KEY_FILE": str(home / "record.key"),
           "AUTOGRADER_AS_USER": "1"}
    pytest_cmd = (f"cd {ROOT} && exec setpriv --reuid={SUITE_USER} --regid={SUITE_USER} --clear-groups "
                  f"{sys.executable} -m pytest -q -p no:cacheprovider --basetemp={home}/pt "
                  f"{ROOT / 'autograder' / 'tests' / 'test_adversarial.py'} -m 'not slow' -x")
    script.append(pytest_cmd)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", "\n".join(script)],
                       capture_output=True, text=True, env=env, timeout=1500)
    shutil.rmtree(home, ignore_errors=True)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout and " error" not in r.stdout
