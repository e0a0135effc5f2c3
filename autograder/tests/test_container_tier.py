"""The isolation tiers and the one function that picks them (isolation.sandbox.choose_tier),
and the container tier itself: what a child confined by it can and cannot do, and that it
grades exactly like the in-process graders (so like bubblewrap, test_isolation.py).

Here the container tier runs on the host (asked for with sandbox="container"): same code,
same confinement. Under an emulated Docker container (a Docker-like seccomp profile, Docker's
default capabilities), where `auto` must pick it by itself: e2e/test_container.py.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.batch import Entry, grade_batch
from autograder.core import get_tests
from autograder.isolation import Limits, Runtime, Sandbox, WeakIsolation, grade_isolated, prepare
from autograder.isolation import container, seccomp_filter
from autograder.isolation.sandbox import choose_tier
from autograder.tests import adversarial
from autograder.tests.submissions import solution, with_solution_code, write
from autograder.tests.test_isolation import _compare, _notebooks_for

ROOT = Path(__file__).resolve().parents[2]
FULL = sum(t.points for t in get_tests("lab00").values())
CONTAINER = container.unavailable()
needs_container = pytest.mark.skipif(bool(CONTAINER), reason=f"the container tier cannot run here: {CONTAINER}")
needs_cc = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")),
                              reason="needs a C compiler to build the native probe")


# ---------------------------------------------------------------- the decision, one test per tier

def test_the_environment_gets_the_tier_it_expects():
    """Run under an emulated container (e2e/test_container.py sets AUTOGRADER_EXPECT_TIER),
    `auto` must pick the container tier by itself."""
    want = os.environ.get("AUTOGRADER_EXPECT_TIER")
    if not want:
        pytest.skip("AUTOGRADER_EXPECT_TIER is not set (only the container emulation sets it)")
    box = choose_tier("auto")
    assert box.tier == want, box.reason


def test_bubblewrap_is_chosen_where_it_runs():
    box = choose_tier("bubblewrap")
    if box.tier is None:
        pytest.skip(f"bubblewrap cannot run here: {box.reason}")
    auto = choose_tier("auto")
    assert auto.tier == "bubblewrap" and not auto.weak and auto.bwrap
    assert auto.describe()["tier"] == auto.describe()["os_sandbox"] == "bubblewrap"
    assert auto.line().startswith("isolation: bubblewrap")


@needs_container
def test_the_container_tier_is_chosen_where_bubblewrap_cannot_start(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_BWRAP", str(tmp_path / "no-bwrap"))
    box = choose_tier("auto")
    assert box.tier == "container" and not box.weak and box.bwrap is None
    assert "bubblewrap" in box.reason and box.describe()["tier"] == "container"
    box.require(allow_weak=False)                      # grades for credit
    assert Sandbox.detect() == box, "Sandbox.detect is choose_tier"


def test_grading_is_refused_where_no_tier_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("AUTOGRADER_CONTAINER_TIER", "off")
    box = choose_tier("auto")
    assert box.tier is None and box.weak
    assert "bubblewrap" in box.reason and "container tier" in box.reason
    with pytest.raises(WeakIsolation, match="refusing to grade"):
        box.require(allow_weak=False)
    assert choose_tier("python").tier is None
    with pytest.raises(ValueError, match="`sandbox` must be one of"):
        choose_tier("docker")


def test_a_batch_prints_its_tier_once_and_records_it_for_every_student(tmp_path, capsys):
    nbs = {"a": solution("lab00"), "b": ROOT / "labs" / "lab00" / "lab00.ipynb"}
    grade_batch([Entry(s, p) for s, p in nbs.items()], "lab00", tmp_path / "out", workers=1, progress=False,
                allow_weak=True)
    err = capsys.readouterr().err
    box = Sandbox.detect()
    assert err.count("isolation: ") == 1 and box.line() in err
    for s in nbs:
        rec = json.loads((tmp_path / "out" / "students" / f"{s}.json").read_text())
        assert rec["sandbox"]["tier"] == box.tier and rec["sandbox"]["weak"] is box.weak


# ---------------------------------------------------------------- the filter

def test_the_filter_refuses_what_it_says_on_both_architectures():
    for arch in seccomp_filter.ARCHES:
        prog = seccomp_filter.build(arch)
        assert len(prog) < 400 and prog[-1] == (0x06, 0, 0, seccomp_filter.RET_ALLOW)
        ks = {k for code, _, _, k in prog if code == 0x15}
        for name in ("socket", "ptrace", "process_vm_readv", "unshare", "setns", "mount", "clone3", "clone",
                     "io_uring_setup", "bpf"):
            assert seccomp_filter.SYSCALLS[arch][name] in ks, (arch, name)


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs the system python3")
def test_the_syscall_numbers_are_the_kernels():
    """Checked against libseccomp (Debian's python3-seccomp), where it is installed."""
    code = ("import json, seccomp\n"
            "out = {}\n"
            "for arch, a in (('x86_64', seccomp.Arch.X86_64), ('aarch64', seccomp.Arch.AARCH64)):\n"
            f"    out[arch] = {{n: seccomp.resolve_syscall(a, n) for n in {sorted(seccomp_filter.SYSCALLS['x86_64'])!r}"
            " if n in " + repr(sorted(set(seccomp_filter.SYSCALLS['x86_64']) | set(seccomp_filter.SYSCALLS['aarch64'])))
            + "}\n"
            "print(json.dumps(out))\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    if r.returncode != 0 and "No module named 'seccomp'" in r.stderr:
        pytest.skip("python3-seccomp (libseccomp's binding) is not installed")
    assert r.returncode == 0, r.stderr
    known = json.loads(r.stdout)
    for arch, table in seccomp_filter.SYSCALLS.items():
        for name, nr in table.items():
            assert known[arch].get(name, nr) == nr, (arch, name, nr, known[arch].get(name))


# ---------------------------------------------------------------- the tier itself

@needs_container
def test_the_container_tier_grades_like_the_in_process_graders(tmp_path):
    """Solution, release (the stub), every bug and every correct variant of lab00, in one
    batch under the container tier: the same verdict for every case as in-process (which
    test_isolation proves for bubblewrap), full marks for the solution, 0 for the stub."""
    nbs = _notebooks_for("lab00", tmp_path / "subs", all_variants=True)
    out = tmp_path / "out"
    runs = container.system_root() / "runs"
    before = set(os.listdir(runs))
    grade_batch([Entry(s, p) for s, p in nbs.items()], "lab00", out, workers=2, progress=False, sandbox="container")
    recs = {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}
    _compare("lab00", nbs, recs)
    assert recs["solution"]["score"] == FULL and recs["release"]["score"] == 0
    assert all(r["sandbox"]["tier"] == "container" and r["restarts"] == 0 for r in recs.values())
    assert set(os.listdir(runs)) <= before, "the runtime's folder in the tree is removed"


def _probe_notebook(tmp_path: Path) -> Path:
    """A submission whose native code runs a shell in the child: it reports who it is, what
    it sees, and what the kernel lets it do (an interpreter it starts has no audit hook)."""
    so = adversarial.shared_library(tmp_path / "native")
    py = sys.executable
    checks = [
        "import socket\ntry:\n    socket.socket(); print('NET_OPEN')\nexcept OSError as e:\n    print('NET_BLOCKED', e.errno)",
        "import socket\ntry:\n    socket.socketpair(); print('UNIX_OPEN')\nexcept OSError as e:\n    print('UNIX_BLOCKED', e.errno)",
        "import os\ntry:\n    os.setuid(0); print('ROOT_AGAIN')\nexcept OSError as e:\n    print('SETUID_BLOCKED', e.errno)",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('UNSHARE', libc.unshare(0x10000000), ctypes.get_errno())\n"
        "print('PTRACE', libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())\n"
        "print('CHROOT', libc.chroot(b'/usr'), ctypes.get_errno())",
    ]
    cmd = ["echo PROBE_RAN", "echo UID $(id -u)", "echo ROOTLS $(ls -a / | tr '\\n' ' ')",
           f"test -e {ROOT}/autograder/reference/lab00.py && echo LEAK_REFERENCE",
           "ls /root /home /autograder /var/cache 2>/dev/null | head -3 | sed 's/^/LEAK_LS /'",
           "(echo x > /usr/l2ft_probe) 2>/dev/null && echo LEAK_WRITE_USR",
           "(echo x > /runs/l2ft_probe) 2>/dev/null && echo LEAK_WRITE_RUNS",
           "(echo x > ./inside_scratch) 2>/dev/null && echo SCRATCH_WRITABLE"]
    checks.append("import resource\nprint('NPROC', resource.getrlimit(resource.RLIMIT_NPROC)[0], 'NOFILE', "
                  "resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    cmd += [f"{py} -I -S -c \"import base64; exec(base64.b64decode('{base64.b64encode(c.encode()).decode()}'))\""
            for c in checks]
    cmd.append("echo PROBE_DONE")
    code = ("import base64, os, ctypes\n"
            f"open('libprobe.so', 'wb').write(base64.b64decode({base64.b64encode(so).decode()!r}))\n"
            f"os.environ['L2FT_CMD'] = {'; '.join(cmd)!r}\n"
            "ctypes.CDLL(os.path.abspath('libprobe.so'))\n"
            "def greedy_token(logits):\n    return 0\n")
    return write(with_solution_code("lab00", {}, first=code), tmp_path / "probe.ipynb")


@needs_container
@needs_cc
def test_a_confined_child_is_unprivileged_offline_and_sees_only_its_tree(tmp_path):
    nb = _probe_notebook(tmp_path)
    box = choose_tier("container")
    with Runtime("lab00", sandbox=box) as rt:
        uids = {rt.jail.uid(0)}
        g = grade_isolated(prepare(nb, "lab00"), rt, limits=Limits(timeout=120, cell_timeout=60))
    out = g.output
    assert "PROBE_RAN" in out and "PROBE_DONE" in out, out[-3000:]
    line = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln.strip()}
    assert int(line["UID"][0]) in uids and int(line["UID"][0]) != 0
    # "/" is the tree (Landlock, where present, even refuses to list it)
    assert set(line["ROOTLS"]) <= {".", "..", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev",
                                    "proc", "runs", "root", "work", "opt", ".complete"}, line["ROOTLS"]
    assert "NET_BLOCKED" in out and "NET_OPEN" not in out and "UNIX_OPEN" not in out
    assert "SETUID_BLOCKED" in out and "ROOT_AGAIN" not in out
    assert line["UNSHARE"][0] == "-1" and line["PTRACE"][0] == "-1" and line["CHROOT"][0] == "-1"
    assert "SCRATCH_WRITABLE" in out and "LEAK" not in out, out[-3000:]
    assert line["NPROC"] == [str(container.NPROC), "NOFILE", str(container.NOFILE)]
    assert g.score == 0
    for uid in uids:
        assert not [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid], "a process outlived it"


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


@needs_container
@needs_cc
def test_a_daemon_dies_before_the_next_child_and_never_reaches_it(tmp_path):
    built = adversarial.build(tmp_path / "subs")
    limits = Limits(timeout=90, test_timeout=5, case_timeout=2.5, cell_timeout=8)
    with Runtime("lab00", sandbox=choose_tier("container")) as rt:
        uid = rt.jail.uid(0)
        bad = grade_isolated(prepare(built["setsid_daemon"], "lab00"), rt, limits=limits, slot=0)
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid]
        good = grade_isolated(prepare(built["honest"], "lab00"), rt, limits=limits, slot=0)
    assert "DAEMON_STARTED" in bad.output and bad.score == 0
    assert not left, "the daemon outlived its child"
    assert good.score == FULL and good.restarts == 0, good.problems
