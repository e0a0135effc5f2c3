"""The parent driver: stage what the sandbox may see, run one zygote per worker, grade.

    runtime = Runtime(lab)                      # a staged course library + one zygote per worker
    sub = prepare(path, lab)                    # the notebook's cells (autograder.notebook)
    out = grade_isolated(sub, runtime, slot=0)  # -> Graded(tests=[TestResult], problems=[...])

The parent is the only trusted judge: it sends each case's probe name and plain
arguments, reads plain JSON observations back and judges them with the lab's pytest tests
(`autograder.plugin.judge_pending`); expected values never enter the sandbox. A child
that exits, crashes, hangs or runs out of memory costs the case it was running (0
points, with a message); a new child is forked for the remaining cases, and a cell that
killed the child is skipped in the next one.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..notebook import Submission, release_cells, release_notebook_path
from . import container
from .child import remove_tree
from . import sandbox as sb
from .limits import MAX_CONTROL, MAX_MESSAGE, SCRATCH_FILES, SCRATCH_SIZE, SCRATCH_WATCH, Limits
from .wire import PROTOCOL, LineReader, TooLarge, encode, mib, send_fds, wait_readable

ROOT = Path(__file__).resolve().parents[2]
HIDDEN_UNDER_ROOT = ("autograder", "solutions", ".git", "course", "labs")
HARNESS_MODULES = ("__init__", "__main__", "batch", "cli", "gradescope", "release", "reports", "notebook",
                   "new_lab", "mutation", "plugin", "memo")
CHILD_SOURCE = Path(__file__).resolve().parent / "child.py"
# Which CPU kernels torch and MKL use (autograder/rounding.py): when the grading process was told,
# the child is told the same, so the student's code and the judge compute on one set of kernels.
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")


class _HarnessFailure(Exception):
    pass


class _Died(Exception):
    def __init__(self, reason: str, cell: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.cell = cell


class _TooLarge(_Died):
    """The child sent a line longer than MAX_MESSAGE: the parent stopped reading and killed it."""


class _TimedOut(Exception):
    def __init__(self, cell: str | None = None):
        super().__init__("timed out")
        self.cell = cell


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# ====================================================================== staging

def _trusted_sources(lab: str, root: Path, hidden: list[str]) -> dict:
    """module -> (source, is_package): what the zygote imports from memory."""
    ag = root / "autograder"
    mods = {"autograder": (ag / "__init__.py", True), "autograder.graders": (ag / "graders" / "__init__.py", True)}
    for p in sorted(ag.glob("*.py")):   # core, checks, toy models...: not the harnesses or the CLI
        if p.stem not in HARNESS_MODULES:
            mods[f"autograder.{p.stem}"] = (p, False)
    for name in sorted(sb.lab_modules(lab, root)):
        if (ag / "graders" / name / "__init__.py").is_file():    # a lab's API and probes, never its tests
            mods[f"autograder.graders.{name}"] = (ag / "graders" / name / "__init__.py", True)
            mods[f"autograder.graders.{name}.probes"] = (ag / "graders" / name / "probes.py", False)
            for helper in sorted((ag / "graders" / name).glob("_*.py")):   # the probes' private helpers
                if helper.stem != "__init__":
                    mods[f"autograder.graders.{name}.{helper.stem}"] = (helper, False)
    for name in hidden:
        mods[f"course.{name}"] = (root / "course" / f"{name}.py", False)
    return {k: (p.read_text(encoding="utf-8") if p.is_file() else "", pkg) for k, (p, pkg) in mods.items()}


class Runtime:
    """What a batch's children need, made once: BASE/stage/{course (minus answer modules),
    datasets, boot/l2ft_child.py}, and one zygote per worker slot, started lazily."""

    def __init__(self, lab: str, *, sandbox: sb.Sandbox | None = None, root: Path | None = None,
                 base_dir: str | None = None, hide: tuple = ()):
        self.lab = lab
        self.root = Path(root or ROOT).resolve()
        self.sandbox = sandbox or sb.Sandbox.detect()
        self.base = Path(tempfile.mkdtemp(prefix="l2ft-grading-", dir=base_dir or os.environ.get("AUTOGRADER_TMP")))
        os.chmod(self.base, 0o700)
        # the container tier has no mounts: the stage lives inside its chroot (container.Run)
        self.jail = container.Run() if self.sandbox.tier == "container" else None
        self.stage = self.jail.stage if self.jail else self.base / "stage"
        self.inside_root = self.jail.inside if self.jail else sb.INSIDE
        self.hidden = sb.hidden_modules(lab, self.root)
        self.extra_hidden = tuple(str(Path(h).resolve()) for h in hide if h)
        self._counter = 0
        self._lock = threading.Lock()
        self._zygotes: dict[int, _Zygote] = {}
        self._build()

    def _build(self):
        course = self.stage / "course"
        course.mkdir(parents=True)
        for p in sorted((self.root / "course").rglob("*")):
            rel = p.relative_to(self.root / "course")
            if "nbgrader" in rel.parts or "__pycache__" in rel.parts or not p.is_file():
                continue
            if len(rel.parts) == 1 and p.suffix == ".py" and p.stem in self.hidden:
                continue           # the lab's answers: not even visible
            (course / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, course / rel)
        src = self.root / "datasets"
        if src.is_dir():
            shutil.copytree(src, self.stage / "datasets", symlinks=False,
                            ignore=shutil.ignore_patterns("generators", "*.py", "__pycache__"))
        (self.stage / "boot").mkdir()
        shutil.copy2(CHILD_SOURCE, self.stage / "boot" / "l2ft_child.py")
        for dirpath, _, filenames in os.walk(self.stage):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        rel = release_notebook_path(self.lab, self.root)
        self.warm_cells = [src for _, src in release_cells(str(rel))[0]] if rel else []
        self.modules = _trusted_sources(self.lab, self.root, self.hidden)

    # ---------------------------------------------------------------- what the zygote is told
    def inside(self, p: Path) -> str:
        """A staged path as the sandbox sees it."""
        return str(self.inside_root / p.relative_to(self.stage)) if not self.sandbox.weak else str(p)

    def zygote_init(self, slot: int) -> dict:
        weak = self.sandbox.weak
        scratch_root = self.jail.scratch(slot) if self.jail else "/tmp" if not weak else str(self._weak_scratch(slot))
        lib = self.inside_root if not weak else str(self.stage)
        work = os.path.join(scratch_root, "work")
        env = {"HOME": work, "TMPDIR": os.path.join(work, "tmp"), "MPLCONFIGDIR": os.path.join(work, ".matplotlib"),
               "XDG_CACHE_HOME": os.path.join(work, ".cache"), "HF_HOME": os.path.join(work, ".hf"),
               "TORCH_HOME": os.path.join(work, ".torch")}
        reads = ["/usr", "/etc", "/proc", "/dev", "/bin", "/lib", "/lib64", "/sbin", lib] + sb.interpreter_paths()
        deny = [] if not weak else (self._weak_denied())
        init = {"protocol": PROTOCOL, "lab": self.lab, "modules": self.modules,
                "hidden": [f"course.{h}" for h in self.hidden], "lib": lib, "env": env,
                "warm_cells": self.warm_cells, "scratch_root": scratch_root, "pidns": not weak,
                "landlock": self.sandbox.landlock, "read_paths": reads, "deny": deny, "max_message": MAX_MESSAGE,
                # a scratch folder on disk (weak isolation, the container tier) has no tmpfs to bound it
                "scratch_limit": [SCRATCH_SIZE, SCRATCH_FILES, SCRATCH_WATCH] if weak or self.jail else None}
        if self.jail:                     # the container tier: no PID namespace; the child's uid and filter
            init.update(self.jail.zygote_extra(slot, self.modules))
        return init

    def _weak_scratch(self, slot: int) -> Path:
        p = self.base / f"scratch-{slot}"
        p.mkdir(mode=0o700, exist_ok=True)
        return p

    def _weak_denied(self) -> list[str]:
        out = {str((self.root / h).resolve()) for h in HIDDEN_UNDER_ROOT} | set(self.extra_hidden)
        out.add(str(self.base))
        return sorted(out)

    def zygote(self, slot: int) -> "_Zygote":
        z = self._zygotes.get(slot)
        if z is None or not z.alive():
            if z is not None:
                z.stop()
            z = _Zygote(self, slot)
            self._zygotes[slot] = z
        return z

    def new_ctl_dir(self) -> Path:
        with self._lock:
            self._counter += 1
            n = self._counter
        ctl = self.base / f"ctl-{n}"
        ctl.mkdir(mode=0o700)
        return ctl

    def close(self):
        for z in list(self._zygotes.values()):
            z.stop()
        self._zygotes.clear()
        if self.jail:                     # every process of this runtime's uids, and its folder in the tree
            self.jail.close()
        remove_tree(self.base)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ====================================================================== one worker's zygote

class _Zygote:
    """A sandbox with torch, the course library and the lab's probes already imported; it
    forks one child per submission (and per restart) and reaps everything each child left."""

    def __init__(self, runtime: Runtime, slot: int):
        self.runtime = runtime
        self.log = runtime.base / f"zygote-{slot}-{secrets.token_hex(4)}.log"
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = mine
        self.reader = LineReader(mine.fileno(), limit=MAX_CONTROL)
        boot = runtime.inside(runtime.stage / "boot" / "l2ft_child.py")
        py = [sys.executable, "-I", "-B", "-u", boot, str(theirs.fileno())]
        weak = runtime.sandbox.weak
        cmd = py if weak else runtime.jail.command(py) if runtime.jail else \
            sb.bwrap_command(runtime.sandbox.bwrap, runtime.stage, SCRATCH_SIZE) + py
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MALLOC_ARENA_MAX": "2", "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false",
               **{k: os.environ[k] for k in KERNEL_ENV if k in os.environ}}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=str(runtime.base), pass_fds=(theirs.fileno(),),
                                         start_new_session=True, close_fds=True)
        theirs.close()
        self.ready = False
        self.busy = False
        self.sock.sendall(encode(runtime.zygote_init(slot)))

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.reader.eof

    def tail(self) -> str:
        try:
            return self.log.read_bytes()[-3000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def next_message(self, deadline: float | None) -> dict | None:
        """The next control message; None at EOF (the sandbox ended) or past the deadline."""
        while True:
            msg = self.reader.pop()
            if msg is not None:
                return msg
            if self.reader.eof:
                return None
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            if wait_readable([self.sock.fileno()], left):
                self.reader.fill()

    def wait_ready(self, timeout: float):
        if self.ready:
            return
        deadline = time.monotonic() + timeout
        msg = self.next_message(deadline)
        if msg is None or msg.get("t") != "zygote_ready":
            why = (msg or {}).get("message") or self.tail() or "no answer"
            self.stop()
            if msg is None and time.monotonic() >= deadline:
                raise _HarnessFailure(f"the grader's sandbox did not start in time ({timeout:g} s); "
                                      "the machine may be overloaded")
            raise _HarnessFailure(f"the grader's sandbox did not start: {why}")
        self.ready = True

    def fork(self, fds: list[int]) -> int:
        send_fds(self.sock, {"t": "fork"}, fds)
        msg = self.next_message(time.monotonic() + 30)
        if msg is None or msg.get("t") != "forked":
            raise _HarnessFailure("the grader's sandbox did not start a child: " + self.tail())
        self.busy = True
        return int(msg["pid"])

    def kill_child(self) -> dict | None:
        """Stop the running child and everything it started; its exit message (None if the
        zygote itself did not answer, in which case the whole sandbox is stopped)."""
        try:
            self.sock.sendall(encode({"t": "kill"}))
        except OSError:
            pass
        return self.wait_exit(10)

    def wait_exit(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next_message(deadline)
            if msg is None:
                self.stop()
                return None
            if msg.get("t") == "exit":
                self.busy = False
                return msg

    def stop(self):
        try:
            self.sock.sendall(encode({"t": "bye"}))
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.sock.close()
        self.reader.eof = True


# ====================================================================== one child, seen from the parent

class _ChildProcess:
    def __init__(self, runtime: Runtime, sub: Submission, limits: Limits, skip: set[str], slot: int):
        self.runtime, self.sub, self.limits = runtime, sub, limits
        self.ctl = runtime.new_ctl_dir()
        self.nonce = secrets.token_hex(16)
        self.current_cell = None
        self.last_untrusted = None
        self.student_started = False
        self.cell_reports: list[dict] = []
        self.ready: dict | None = None
        self.exit: dict | None = None
        self.cmd_w = self.res_r = None
        self.zygote = runtime.zygote(slot)
        self.zygote.wait_ready(limits.startup_timeout)
        self._start(skip)

    def init_payload(self, skip) -> dict:
        """Everything the child is told: the cells to run and limits. No test inputs'
        expected values, no reference, no judges, no host paths."""
        lim = self.limits
        return {"protocol": PROTOCOL, "nonce": self.nonce,
                "memory": int(lim.memory), "file_size": int(lim.file_size), "cpu": int(lim.timeout + 60),
                "cells": [asdict(c) for c in self.sub.cells if c.id not in skip]}

    def _start(self, skip):
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        self.out_path = self.ctl / "output.txt"
        out_fd = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.pid = self.zygote.fork([cmd_r, res_w, out_fd])
        finally:
            for fd in (cmd_r, res_w, out_fd):
                os.close(fd)
        self.cmd_w, self.res_r = cmd_w, res_r
        self.reader = LineReader(res_r, self.nonce)
        self.send(self.init_payload(skip))

    # ---------------------------------------------------------------- messages
    def _next(self, deadline: float) -> dict:
        """The next well-formed message carrying this child's nonce. Junk lines are skipped;
        the child's exit (reported by the zygote) raises _Died; the deadline _TimedOut."""
        z = self.zygote
        while True:
            try:
                msg = self.reader.pop()
            except TooLarge:                   # read no further: kill the writer, drop what was read
                self.kill()
                raise _TooLarge(f"sent a message larger than {mib(MAX_MESSAGE)}, the limit of one result",
                                self.current_cell) from None
            if msg is not None:
                return msg
            if self.reader.eof and self.exit is None:
                self.exit = z.wait_exit(5) or {}
            if self.exit is not None:
                raise _Died(self._death_reason(), self.current_cell)
            left = deadline - time.monotonic()
            if left <= 0:
                raise _TimedOut(self.current_cell)
            r = wait_readable([self.res_r, z.sock.fileno()], left)
            if self.res_r in r:
                self.reader.fill()
            if z.sock.fileno() in r:
                z.reader.fill()
                zmsg = z.reader.pop()
                if z.reader.eof and zmsg is None:
                    self.exit = {}
                elif zmsg is not None and zmsg.get("t") == "exit":
                    z.busy = False
                    self.exit = zmsg
                    # what it said before it ended still counts (up to one message's worth:
                    # a process it left behind may hold the pipe and write forever)
                    while not self.reader.eof and len(self.reader.buf) <= MAX_MESSAGE \
                            and wait_readable([self.res_r], 0.2):
                        self.reader.fill()

    def _death_reason(self) -> str:
        e = self.exit or {}
        sig, code = e.get("signal"), e.get("code")
        if e.get("scratch"):
            return (f"was stopped: it wrote {e['scratch']} to its scratch folder, past the limit of "
                    f"{SCRATCH_SIZE >> 20} MiB or {SCRATCH_FILES} entries")
        if sig:
            name = _signal_name(int(sig))
            extra = {"SIGSEGV": " (a crash: often unbounded recursion)", "SIGKILL": " (out of memory, or stopped)",
                     "SIGXCPU": " (CPU time limit)", "SIGABRT": " (an abort inside a library)"}.get(name, "")
            return f"crashed with {name}{extra}"
        if code == 0:
            return "exited early (exit code 0): your code ended the Python process, e.g. with os._exit()"
        if code is not None:
            return f"exited with code {code}: your code ended the Python process (os._exit, or a fatal error)"
        return "was stopped (its sandbox ended)"

    def send(self, msg: dict):
        try:
            os.write(self.cmd_w, encode(msg))
        except OSError:
            if self.exit is None:
                self.exit = self.zygote.wait_exit(5) or {}
            raise _Died(self._death_reason(), self.current_cell) from None

    # ---------------------------------------------------------------- phases
    def boot(self, submission_deadline: float):
        """Wait for the child to run the cells and report ready. Once the student's first
        cell has started, nothing on this pipe can be a grader error (it may be forged)."""
        lim = self.limits
        deadline = min(submission_deadline, time.monotonic() + lim.startup_timeout)
        while True:
            msg = self._next(deadline)
            t = msg.get("t")
            if t == "cell_start":
                self.current_cell = str(msg.get("id"))
                if not msg.get("trusted") or self.student_started:
                    self.student_started = True
                    self.last_untrusted = self.current_cell
                deadline = min(submission_deadline, time.monotonic() + lim.cell_timeout)
            elif t == "cell":
                self.cell_reports.append(msg)
                self.current_cell = None
            elif t == "setup_done":
                deadline = min(submission_deadline, time.monotonic() + lim.cell_timeout)
            elif t == "fatal":
                text = str(msg.get("message"))[:4000]
                if self.student_started:
                    last = text.strip().splitlines()[-1:] or [""]
                    self.kill()
                    raise _Died(f"broke the grader's process ({last[0][:300]})", self.last_untrusted)
                raise _HarnessFailure(text)
            elif t == "ready":
                self.ready = msg
                return msg

    def probe(self, test: str, case: str, deadline: float, call: tuple) -> dict:
        req = secrets.token_hex(8)
        self.current_cell = None
        # which probe of the lab's probes.py, with what plain arguments (test and case: for messages)
        msg = {"t": "probe", "test": test, "case": case, "req": req,
               "probe": call[0], "args": list(call[1]), "kwargs": dict(call[2])}
        self.send(msg)
        while True:
            msg = self._next(deadline)
            if msg.get("req") == req and msg.get("t") == "answer":
                return msg

    def close(self):
        if self.exit is None:
            try:
                self.send({"t": "bye"})
            except _Died:
                pass
            if self.exit is None:
                self.exit = self.zygote.wait_exit(5)
                if self.exit is None:
                    self.exit = {}
        self.kill()

    def kill(self):
        if self.exit is None:
            self.exit = self.zygote.kill_child() or {}
        for name in ("cmd_w", "res_r"):
            v = getattr(self, name, None)
            if v is not None:
                try:
                    os.close(v)
                except OSError:
                    pass
                setattr(self, name, None)

    def output(self) -> str:
        try:
            with open(self.out_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                return f.read().decode("utf-8", "replace")
        except (OSError, AttributeError):
            return ""

    def cleanup(self):
        self.kill()
        remove_tree(self.ctl)


# ====================================================================== results

@dataclass
class Graded:
    lab: str
    tests: list                      # list[core.TestResult]
    problems: list[str] = field(default_factory=list)
    output: str = ""                 # tail of what the student's code printed
    restarts: int = 0                # children started after the first
    seconds: float = 0.0
    sandbox: dict = field(default_factory=dict)
    harness_error: str | None = None  # the grader itself failed (not the student's fault)

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 4)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 4)


def _failed(case, message: str, hint: str | None = None):
    from ..core import CaseResult
    return CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture, message, None, None,
                      hint if hint is not None else case.hint)


def _text(v, n=2000):
    return v[:n] if isinstance(v, str) else (None if v is None else json.dumps(v)[:n] if _jsonable(v) else None)


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError, RecursionError):
        return False


def _from_child(case, msg: dict):
    """Turn the child's answer for `case` into a CaseResult. Only `obs` can earn points, and
    only through the parent's pytest tests (it waits as core.Pending); everything else the
    child says is a 0 with text."""
    from ..core import CaseResult, Pending
    kind = msg.get("kind")
    if kind == "obs":
        return Pending(case.name, 0.0, case.points, False, case.visible, case.fixture, got=msg.get("obs"),
                       hint=case.hint)
    if kind == "fail":
        hint = msg.get("hint")
        return CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture,
                          str(msg.get("message", ""))[:2000] or "failed", msg.get("expected"), msg.get("got"),
                          hint if isinstance(hint, str) else case.hint)
    if kind == "tampered":
        names = msg.get("names") if isinstance(msg.get("names"), list) else []
        return _failed(case, f"your code replaced {', '.join(map(str, names[:8]))[:500]} while this case ran; "
                             "the result cannot be trusted",
                       "Do not reassign attributes of torch, numpy, builtins, course or the grader.")
    return _failed(case, "the grading process sent an unreadable answer")


def _cell_problem(rep: dict) -> str | None:
    if rep.get("ok"):
        return None
    cid = str(rep.get("id"))[:200]
    err = str(rep.get("error", ""))[:600]
    if rep.get("kind") == "syntax":
        return f"cell `{cid}` has a syntax error ({err}); it was not run, so what it defines is missing."
    if rep.get("trusted"):
        return f"the lab's setup cell `{cid}` failed in the grader ({err})."
    return f"cell `{cid}` raised {err}; definitions before that line were kept."
def grade_isolated(sub: Submission, runtime: Runtime, *, limits: Limits | None = None,
                   visible_only: bool = False, slot: int = 0, tests=None, judge: bool = True) -> Graded:
    """Grade one prepared submission: children run probes, this process judges (pytest-judged
    cases all at once at the end; judge=False leaves them core.Pending)."""
    from ..core import TestResult, get_tests
    limits = limits or Limits()
    tests = list((tests or get_tests(sub.lab)).values()) if not isinstance(tests, list) else tests
    t0 = time.monotonic()
    total_deadline = t0 + limits.timeout
    out = Graded(sub.lab, [], list(sub.problems), sandbox=runtime.sandbox.describe())
    plan = [(t, [c for c in t.cases if c.visible or not visible_only]) for t in tests]

    if sub.fatal:
        for t, cases in plan:
            r = TestResult(t.lab, t.name, t.description)
            r.cases = [_failed(c, f"the notebook could not be graded: {sub.fatal}",
                               "Submit the lab's .ipynb file itself, saved from Jupyter.") for c in cases]
            out.tests.append(r)
        out.problems.insert(0, sub.fatal)
        out.seconds = round(time.monotonic() - t0, 3)
        return out

    skip: set[str] = set()
    child: _ChildProcess | None = None
    outputs: list[str] = []
    starts = 0
    reported_cells: set[str] = set()

    def start_child() -> _ChildProcess | None:
        """A child that has run the cells, or None when the time is up. Cells that kill the
        child are skipped in the next attempt."""
        nonlocal starts
        while time.monotonic() < total_deadline:
            starts += 1
            c = None
            try:
                c = _ChildProcess(runtime, sub, limits, skip, slot)
                ready = c.boot(total_deadline)
            except (_Died, _TimedOut) as e:
                if c is not None:
                    outputs.append(c.output())
                    c.cleanup()
                cell = e.cell or (c.last_untrusted if c is not None else None)
                if cell is None:
                    if isinstance(e, _TimedOut):
                        raise _HarnessFailure("the grader did not start in time "
                                              f"({limits.startup_timeout:g} s); the machine may be overloaded")
                    raise _HarnessFailure(f"the grading process {e.reason} before running any of your code")
                skip.add(cell)
                why = (f"took longer than {limits.cell_timeout:g} s" if isinstance(e, _TimedOut)
                       else e.reason)
                out.problems.append(f"cell `{cell}` stopped the grading process ({why}); "
                                    "it was skipped, so what it defines is missing.")
                continue
            for rep in c.cell_reports:
                key = f"{rep.get('id')}:{rep.get('ok')}"
                if key in reported_cells:
                    continue
                reported_cells.add(key)
                p = _cell_problem(rep)
                if p:
                    out.problems.append(p)
            restored = ready.get("restored") if isinstance(ready.get("restored"), list) else []
            if restored and "restored" not in reported_cells:
                reported_cells.add("restored")
                out.problems.append("your notebook replaced " + ", ".join(map(str, restored[:8])) +
                                    "; the grader put the originals back before testing.")
            return c
        return None

    try:
        for t, cases in plan:
            result = TestResult(t.lab, t.name, t.description)
            out.tests.append(result)
            used = 0.0
            deaths = 0
            for case in cases:
                now = time.monotonic()
                if now >= total_deadline:
                    result.cases.append(_failed(case, f"not run: the submission's time limit "
                                                      f"({limits.timeout:g} s) was used up by earlier cases"))
                    continue
                if used >= limits.test_timeout:
                    result.cases.append(_failed(case, f"not run: this test's time limit "
                                                      f"({limits.test_timeout:g} s) was used up by earlier cases"))
                    continue
                if deaths >= limits.max_deaths_per_test:
                    result.cases.append(_failed(case, f"not run: your code stopped the grading process "
                                                      f"{deaths} times in this test"))
                    continue
                if child is None:
                    child = start_child()
                    if child is None:
                        result.cases.append(_failed(case, "not run: the submission's time limit was used up"))
                        continue
                budget = min(limits.case_timeout, limits.test_timeout - used)
                start = time.monotonic()
                deadline = min(total_deadline, start + budget)
                try:
                    msg = child.probe(t.name, case.name, deadline, case.call)
                    result.cases.append(_from_child(case, msg))
                except _TimedOut:
                    result.cases.append(_failed(case, f"timed out after {time.monotonic() - start:.0f} s "
                                                      f"(an endless loop, or far too slow)",
                                                "Check the loop's stopping condition; the fixtures are small."))
                    outputs.append(child.output())
                    child.cleanup()
                    child = None
                    deaths += 1
                except _TooLarge:
                    result.cases.append(_failed(case, f"the result of this case is larger than {mib(MAX_MESSAGE)}; "
                                                      f"the limit is {mib(MAX_MESSAGE)} (the grader stopped reading "
                                                      "it and ended the process)",
                                                "Return only what the function's docstring asks for."))
                    outputs.append(child.output())
                    child.cleanup()
                    child = None
                    deaths += 1
                except _Died as e:
                    result.cases.append(_failed(case, f"the grading process {e.reason} while running this case"))
                    outputs.append(child.output())
                    child.cleanup()
                    child = None
                    deaths += 1
                used += time.monotonic() - start
    except _HarnessFailure as e:
        out.harness_error = str(e)
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
        short = lines[-1][:300] if lines else "unknown"
        out.problems.append(f"grader error (not caused by your code; the instructor will regrade): {short}")
        done = {(r.name, c.name) for r in out.tests for c in r.cases}
        names = {r.name: r for r in out.tests}
        for t, cases in plan:
            r = names.get(t.name)
            if r is None:
                r = TestResult(t.lab, t.name, t.description)
                out.tests.append(r)
            for c in cases:
                if (t.name, c.name) not in done:
                    r.cases.append(_failed(c, "not run: the grader failed (see the problems above)", ""))
    finally:
        if child is not None:
            child.close()
            outputs.append(child.output())
            child.cleanup()
    if judge:
        from ..plugin import judge_pending
        judge_pending(sub.lab, out.tests)
    out.restarts = max(0, starts - 1)
    text = "".join(o for o in outputs if o)
    out.output = text[-limits.output_tail:] if limits.output_tail else ""
    out.seconds = round(time.monotonic() - t0, 3)
    return out

