"""The grader inside an emulated Docker container (Gradescope's, a Kubernetes pod's): as root,
under a seccomp filter shaped like Docker's default profile, with only Docker's default
capabilities (e2e/docker_like.py). Namespaces are refused there, so bubblewrap cannot start
and `auto` must pick the container tier by itself; it must then grade exactly as bubblewrap
does, and the adversarial notebooks must gain nothing.

  * the emulation is what it claims: Docker's capability set, seccomp on, no user namespace;
  * `python -m autograder grade`: stub, solution, a bug and a correct variant of lab00 get the
    same records (scores, every case's verdict) as outside the emulation (bubblewrap);
  * Gradescope: the bundle's tree-building step (what setup.sh runs at image build time) and
    its run_autograder, with a scratch folder standing in for /autograder: the same
    results.json as with bubblewrap, but for execution_time. setup.sh itself installs
    Python and torch from the network and is not run here (too slow, and offline);
  * the red team: test_adversarial.py (not the slow ones) and test_container_tier.py run
    under the emulation, with AUTOGRADER_EXPECT_TIER=container; afterwards no process of the
    tier's uids is left.

Needs root, setpriv (util-linux) and libseccomp's binding for the system python3 (`apt-get
install python3-seccomp`, which `make e2e` does as root); skipped, saying which, without them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKER_LIKE = ROOT / "e2e" / "docker_like.py"
SYS_PY = "/usr/bin/python3"


def _why_not() -> str:
    if os.geteuid() != 0:
        return "the emulated container runs as root"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux)"
    if not Path(SYS_PY).exists():
        return "needs the system python3"
    r = subprocess.run([SYS_PY, "-c", "import seccomp"], capture_output=True)
    if r.returncode != 0:
        return "needs libseccomp's Python binding (apt-get install python3-seccomp)"
    return ""


WHY = _why_not()
pytestmark = pytest.mark.skipif(bool(WHY), reason=WHY or "ok")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root", "OMP_NUM_THREADS": "1",
       "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _docker(cmd: list[str], *, env: dict | None = None, timeout: float = 1800, check: bool = True, cwd=ROOT):
    r = subprocess.run([SYS_PY, str(DOCKER_LIKE), "--check", "--", *cmd], capture_output=True, text=True,
                       env={**ENV, **(env or {})}, timeout=timeout, cwd=cwd)
    if check:
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r


def _native(cmd: list[str], *, env: dict | None = None, timeout: float = 1800, cwd=ROOT):
    r = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, **(env or {})}, timeout=timeout, cwd=cwd)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r


def _tier_uids_alive() -> list[str]:
    from autograder.isolation import container
    lo, hi = container.uid_base(), container.uid_base() + container.UID_BLOCK * container.UID_BLOCKS
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if lo <= os.stat(f"/proc/{p}").st_uid < hi:
                    out.append(p)
            except OSError:
                pass
    return out


@pytest.fixture(scope="module")
def subs(tmp_path_factory):
    from autograder.tests.submissions import from_variant, solution, write
    d = tmp_path_factory.mktemp("subs")
    variants = ROOT / "autograder" / "variants" / "lab00"
    bug = sorted(variants.glob("bug_*.py"))[0]
    correct = sorted(variants.glob("correct_*.py"))
    out = {"stub": ROOT / "labs" / "lab00" / "lab00.ipynb", "solution": solution("lab00"), "bug": bug}
    if correct:
        out["correct"] = correct[0]
    for name, src in list(out.items()):
        nb = d / name / "lab00.ipynb"
        nb.parent.mkdir(parents=True)
        if src.suffix == ".py":
            write(from_variant("lab00", src), nb)
        else:
            shutil.copy(src, nb)
        out[name] = nb
    return d, out


def test_the_emulation_refuses_namespaces_and_auto_picks_the_container_tier():
    r = _docker([sys.executable, "-c", "from autograder.isolation.sandbox import choose_tier\n"
                                       "import json; print(json.dumps(choose_tier('auto').describe()))"])
    assert "CapEff:\t00000000a80425fb" in r.stdout, "Docker's default capabilities, no others"
    assert "Seccomp:\t2" in r.stdout and "USERNS_REFUSED" in r.stdout
    desc = json.loads(r.stdout.strip().splitlines()[-1])
    assert desc["tier"] == "container" and not desc["weak"] and "bubblewrap" in desc["reason"]


def _records(out: Path) -> dict:
    recs = {}
    for p in sorted((out / "students").glob("*.json")):
        rec = json.loads(p.read_text())
        recs[rec["student"]] = {"score": rec["score"], "max_score": rec["max_score"], "status": rec["status"],
                                "tier": rec["sandbox"]["tier"],
                                "cases": {(t["name"], c["name"]): c["passed"] for t in rec["tests"] for c in t["cases"]}}
    return recs


def test_grade_in_the_container_grades_as_bubblewrap_does(subs, tmp_path):
    folder, nbs = subs
    key = {"AUTOGRADER_RECORD_KEY_FILE": str(tmp_path / "record.key")}
    cmd = [sys.executable, "-m", "autograder", "grade", str(folder), "--lab", "lab00", "--workers", "2", "--quiet"]
    r = _docker(cmd + ["--out", str(tmp_path / "in-container")], env=key)
    assert r.stderr.count("isolation: container tier") == 1, r.stderr[-2000:]
    inside = _records(tmp_path / "in-container")
    assert set(inside) == set(nbs) and {v["tier"] for v in inside.values()} == {"container"}
    full = inside["solution"]["max_score"]
    assert inside["solution"]["score"] == full and inside["stub"]["score"] == 0
    assert 0 < inside["bug"]["score"] < full
    if "correct" in inside:
        assert inside["correct"]["score"] == full
    _native(cmd + ["--out", str(tmp_path / "outside")], env=key)
    outside = _records(tmp_path / "outside")
    if {v["tier"] for v in outside.values()} != {"bubblewrap"}:
        pytest.skip("bubblewrap cannot run outside the emulation here: nothing to compare with")
    for name in nbs:
        a, b = dict(inside[name]), dict(outside[name])
        a.pop("tier"), b.pop("tier")
        assert a == b, f"{name}: the container tier and bubblewrap disagree"


def _standin(base: Path, bundle: Path, nb: Path, run) -> dict:
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    os.chmod(root / "source" / "run_autograder", 0o755)
    shutil.copy(nb, root / "submission" / "lab00.ipynb")
    env = {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    r = run(["bash", str(root / "source" / "run_autograder")], env=env, cwd=root)
    res = json.loads((root / "results" / "results.json").read_text())
    res.pop("execution_time", None)
    assert oct(os.stat(root / "source").st_mode & 0o777) == "0o700", "the graders are root's alone"
    return {"results": res, "stdout": r.stdout}


def test_gradescope_grades_in_its_container_as_with_bubblewrap(subs, tmp_path):
    from autograder import reports
    from autograder.gradescope import build_bundle
    _, nbs = subs
    bundle = build_bundle("lab00", tmp_path / "zip")
    # what setup.sh runs once at image build time, with the bundle's own code
    src = tmp_path / "setup" / "source"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(src)
    r = _docker([sys.executable, "-m", "autograder.isolation", "build"], env={"PYTHONPATH": str(src)},
                cwd=src)
    assert "container tier: available" in r.stdout, r.stdout
    for name, nb in nbs.items():
        inside = _standin(tmp_path / f"in-{name}", bundle, nb, _docker)
        assert "'tier': 'container'" in inside["stdout"], inside["stdout"][-2000:]
        res = inside["results"]
        assert reports.validate_gradescope(res) == []
        full = sum(t["max_score"] for t in res["tests"])
        want = {"stub": 0, "solution": full, "correct": full}.get(name)
        if want is not None:
            assert res["score"] == want, (name, res["score"])
        else:
            assert 0 < res["score"] < full, (name, res["score"])
        outside = _standin(tmp_path / f"out-{name}", bundle, nb, _native)
        if "'tier': 'bubblewrap'" not in outside["stdout"]:
            pytest.skip("bubblewrap cannot run outside the emulation here: nothing to compare with")
        assert res == outside["results"], f"{name}: results.json differs between the two tiers"
    assert not _tier_uids_alive()


def test_hostile_scratch_stops_neither_the_batch_nor_the_disk_in_the_container(tmp_path):
    """autograder/tests/test_scratch.py under the emulation: a filler of the scratch folder (on the
    machine's disk in this tier) is stopped at the bound, a tree 1,500 folders deep is cleared, and
    the next student on that worker is graded in full."""
    r = _docker([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--basetemp={tmp_path / 'pt'}",
                 "autograder/tests/test_scratch.py"],
                env={"AUTOGRADER_EXPECT_TIER": "container", "AUTOGRADER_RECORD_KEY_FILE": str(tmp_path / "k")},
                check=False, timeout=1200)
    assert r.returncode == 0 and "5 passed" in r.stdout, r.stdout[-6000:] + r.stderr[-2000:]
    assert not _tier_uids_alive()


def test_the_red_team_gains_nothing_in_the_container(tmp_path):
    """The project's adversarial notebooks (read the reference, write outside scratch, native
    .so files, daemons, forged messages, huge output...) and the tier's own probes, under the
    emulation: every expectation of test_adversarial.py holds, with the container tier."""
    r = _docker([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not slow",
                 f"--basetemp={tmp_path / 'pt'}", "autograder/tests/test_adversarial.py",
                 "autograder/tests/test_container_tier.py"],
                env={"AUTOGRADER_EXPECT_TIER": "container", "AUTOGRADER_RECORD_KEY_FILE": str(tmp_path / "k")},
                check=False, timeout=3000)
    tail = r.stdout[-6000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    summary = r.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary, tail
    skipped = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert all("bubblewrap cannot run here" in ln for ln in skipped), skipped   # nothing else may skip
    assert not _tier_uids_alive(), "a process of the container tier outlived its grading"
