"""nbgrader's autograde kernel runs inside bubblewrap (autograder/sandboxed_kernel.py): the attacks
a notebook made when it ran with the instructor's rights now reach nothing.

Each attack is code a submitted notebook runs under `nbgrader autograde`: rewrite a grader's
kept values, read or plant files in nbgrader's output folder (a batch's journal, records),
read the solutions, read a file in the instructor's home or environment, leave a daemon
behind. The kernel is started by the kernel manager `configure` gives nbgrader's autograde
(SandboxedExecute's), for a notebook that names the usual `python3` kernel, and what the code
saw comes back as its printed output."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import traitlets.config

from autograder import sandboxed_kernel

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(bool(sandboxed_kernel.unavailable()), reason="bubblewrap cannot start here")

ATTACK = r'''
import json, os, subprocess
out = {"uid": os.getuid(), "cwd": os.getcwd(), "secret": os.environ.get("L2FT_INSTRUCTOR_SECRET")}
def attempt(what, fn):
    try:
        fn()
        out[what] = "done"
    except OSError as e:
        out[what] = type(e).__name__
attempt("rewrite_expected", lambda: open(ROOT + "/autograder/graders/lab04/_expected.pt", "ab").write(b"x"))
attempt("plant_journal", lambda: open(ROOT + "/course/nbgrader/.batch.json", "w").write("{}"))
attempt("read_solution", lambda: open(ROOT + "/solutions/lab01/lab01.ipynb").read())
attempt("read_home", lambda: open(HOME_MARKER).read())
out["nbgrader_folder"] = os.listdir(ROOT + "/course/nbgrader") if os.path.isdir(ROOT + "/course/nbgrader") else None
import autograder.kernel, course.fixtures                      # what hidden test cells need still imports
out["imports"] = True
subprocess.Popen(["sleep", "300"], start_new_session=True)     # a daemon meant to outlive grading
print("ATTACK" + json.dumps(out))
'''


def _run(km, kc, code: str, timeout: float = 60) -> tuple[str, list]:
    msg_id = kc.execute(code)
    text, errors = "", []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            text += m["content"]["text"]
        elif m["msg_type"] == "error":
            errors.append(m["content"]["ename"])
        elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
    return text, errors


def _sleepers() -> set[int]:
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"300"]:
                    out.add(int(p.name))
            except OSError:
                pass
    return out


@pytest.mark.slow
def test_an_autograde_kernel_reaches_neither_the_course_nor_the_grades_nor_outlives_grading(monkeypatch, tmp_path):
    c = traitlets.config.Config()
    assert "l2ft-autograde" in sandboxed_kernel.configure(c)
    execute = c.Autograde.autograde_preprocessors[0]
    assert execute is sandboxed_kernel.SandboxedExecute
    monkeypatch.setenv("L2FT_INSTRUCTOR_SECRET", "s3cret")
    (ROOT / "course" / "nbgrader").mkdir(parents=True, exist_ok=True)
    before = _sleepers()
    expected = (ROOT / "autograder/graders/lab04/_expected.pt").read_bytes()
    marker = Path.home() / f".l2ft-kernel-test-{os.getpid()}"      # what the instructor's home holds
    marker.write_text("the instructor's")
    from jupyter_client.manager import KernelManager

    class SyncSandboxed(KernelManager):      # the same spec as nbgrader's (async) manager, driven step by step
        kernel_spec = sandboxed_kernel.SandboxedKernelManager.kernel_spec
    km = SyncSandboxed(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        text, errors = _run(km, kc, f"ROOT = {str(ROOT)!r}\nHOME_MARKER = {str(marker)!r}\n" + ATTACK)
        assert not errors, (errors, text)
        seen = json.loads(text.split("ATTACK", 1)[1])
        # an endless cell is stopped by nbgrader's interrupt (a message: a signal would reach bubblewrap)
        msg_id = kc.execute("import time\nwhile True:\n    time.sleep(0.05)")
        time.sleep(1.5)
        km.interrupt_kernel()
        interrupted = []
        while True:
            m = kc.get_iopub_msg(timeout=30)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "error":
                interrupted.append(m["content"]["ename"])
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        marker.unlink()
    assert seen["read_home"] == "FileNotFoundError"
    assert seen["imports"] is True and seen["cwd"] == "/tmp" and seen["secret"] is None
    assert seen["rewrite_expected"] == "OSError" or seen["rewrite_expected"].endswith("Error")
    assert seen["rewrite_expected"] != "done" and seen["plant_journal"] != "done"
    assert seen["read_solution"] == "FileNotFoundError" and seen["nbgrader_folder"] == []
    assert (ROOT / "autograder/graders/lab04/_expected.pt").read_bytes() == expected
    assert not (ROOT / "course" / "nbgrader" / ".batch.json").exists()
    assert interrupted == ["KeyboardInterrupt"]
    for _ in range(50):                 # the PID namespace ended with the kernel: the daemon with it
        if not (_sleepers() - before):
            break
        time.sleep(0.1)
    assert not (_sleepers() - before), "a process the notebook started outlived the kernel"


def test_the_course_configs_select_the_sandboxed_kernel_for_autograde_only():
    """The repository's nbgrader_config.py and the hub's (hub/roster.py) both call configure(c):
    autograde's Execute step becomes SandboxedExecute, the rest of its steps stay, and nothing
    else changes (validate, the launcher's kernels)."""
    from nbgrader.converters.autograde import Autograde
    from traitlets.config.loader import PyFileConfigLoader
    before = os.environ.get("JUPYTER_PATH")
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    steps = cfg.Autograde.autograde_preprocessors
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    assert steps[0] is sandboxed_kernel.SandboxedExecute and steps[1:] == default[1:]
    assert "kernel_name" not in cfg.Execute and os.environ.get("JUPYTER_PATH") == before
    assert "configure(c)" in (ROOT / "hub" / "roster.py").read_text(encoding="utf-8")
    spec = json.loads((sandboxed_kernel.KERNELS / "l2ft-autograde" / "kernel.json").read_text())
    assert spec["interrupt_mode"] == "message" and spec["argv"][:3] == ["python", "-m", "autograder.sandboxed_kernel"]


def test_plain_kernel_on_request_and_a_clear_usage_line(monkeypatch, capsys):
    monkeypatch.setenv("AUTOGRADER_AUTOGRADE_KERNEL", "plain")
    c = traitlets.config.Config()
    assert "plain" in sandboxed_kernel.configure(c) and "Autograde" not in c
    assert sandboxed_kernel.main([]) == 2 and "usage:" in capsys.readouterr().err
    assert os.environ.get("AUTOGRADER_AUTOGRADE_KERNEL") == "plain"
