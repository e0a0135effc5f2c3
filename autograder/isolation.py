"""The standalone harness: a submission's code runs in a child process, the parent judges.

    runtime = Runtime(lab)                      # a staged, read-only copy of what children need
    sub = prepare(path, lab)                    # the notebook's cells (parent side, no code runs)
    out = grade_isolated(sub, runtime)          # -> Graded(tests=[TestResult], problems=[...])

Protocol. The parent writes an init file (lab, cells, limits, sandbox settings) and starts
`python -I -B boot.py INIT` (a fresh interpreter in isolated mode), optionally inside a
private mount namespace (`unshare --mount`). The child, still trusted, imports torch, the
course library and the lab's graders, with `autograder.reference` replaced by a stub that
refuses to compute anything; then it drops root (when it has it), sets resource limits,
runs the release's locked setup cells, locks itself down (audit hook, import blocker,
snapshot of library namespaces) and only then runs the student's cells, one at a time.
After that it answers requests on a command pipe: the parent sends (test, case, nonce),
the child runs that case's probe on the student's namespace and writes one JSON line
(plain data only, never pickle) to a results pipe opened before any student code ran.
The parent judges with `autograder.core.judge_case`; expected values never enter the child.
Student stdout/stderr go to a capture file, so a printed "passed" line is only text.

A child that exits, crashes, hangs or runs out of memory costs the case it was running
(0 points, with a message); a new child is started for the remaining cases, and a cell
that killed the child during setup is skipped in the next one. Limits (class Limits):
per case, per Test (probe time only), per cell, per submission; RLIMIT_AS (default 4 GiB:
torch + matplotlib need ~0.9 GiB of address space), RLIMIT_FSIZE, RLIMIT_CPU, no core files.

What protects the grade
-----------------------
Always (any user, any OS with Python's audit hooks):
  * judging happens in the parent; the child gets only (test, case) names. Observations
    come back as JSON (never pickle) and are judged like any other value, so forging the
    channel, printing "PASS" lines or returning objects that cheat == (core.to_plain
    refuses subclasses of int/float/list/...) earns nothing;
  * `autograder.reference` is a stub in the child, and after the graders are imported
    `autograder.graders/reference/...` are removed from sys.modules and blocked by a
    meta-path hook and by the audit hook's `import` event;
  * an audit hook (sys.addaudithook: Python code cannot remove it; its policy is bound in
    closures, not module globals) allows reading only the interpreter, site-packages, the
    staged course library and fixtures, system folders and the child's own scratch and
    /proc/self; writing only in the scratch folder; and refuses subprocesses, fork/exec,
    os.kill, symlinks/hard links, sockets, gc.get_objects/referrers, sys.settrace,
    setrlimit, ctypes symbol lookup and foreign calls (`_posixsubprocess.fork_exec`, which
    raises no audit event, is replaced);
  * library namespaces (builtins, torch, torch.Tensor, numpy, math, course.*, autograder.core,
    the grader module) are snapshotted before student code runs: whatever the notebook
    replaced is put back before each case, and a case during which something is replaced
    scores 0 ("tampered");
  * a clean environment (no parent variables), HOME/TMPDIR in the scratch folder, a new
    session, PR_SET_PDEATHSIG (children die with the grader), stdin from /dev/null.
As root (Gradescope, Docker, CI) in addition:
  * each child drops to its own uid (61000 + worker slot): it cannot write the repository,
    read root-only files, signal the grader or other children, or read the staged graders
    (mode 0700, imported before the drop);
  * if `unshare --mount` works, a private mount namespace covers the grader sources,
    solutions/, .git, the gradebook and the instructor's input/output folders with empty
    read-only tmpfs mounts (and covers e.g. /root, binding back only the interpreter).
Residual risks (documented, not prevented):
  * without root, native code can read any file the grading user can read: e.g.
    torch.UntypedStorage.from_file (a C++ reader the audit hook never sees) can read
    autograder/reference/*.py (test_adversarial skips that attack then);
  * probes run in the student's process, so facts a probe measures there (an input left
    unchanged, a call counter on an object handed to the student's function) can be forged
    by code that tampers with those objects; outputs cannot be forged without knowing the
    expected values, which never enter the child;
  * the judges' source (probe.__globals__ reaches the grader module) is in the child's
    memory, so hidden case inputs can be inspected; judges must compute expected values with
    the reference rather than embed them as constants;
  * course.* is importable by students by design (later labs build on it), so a course
    module that implements an exercise (e.g. course.generation for lab03) is available;
  * nbgrader's in-kernel harness has none of this: a notebook that replaces
    autograder.kernel.grade gets full marks under `nbgrader autograde` (measured in
    test_isolation); os.kill(-1, ...) there would kill every process of the user.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, asdict
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30
MiB = 1 << 20
PROTOCOL = 1
MAX_MESSAGE = 64 * MiB          # one JSON line from the child
MAX_NOTEBOOK = 32 * MiB         # a larger .ipynb is refused before parsing
HIDDEN_UNDER_ROOT = ("autograder", "solutions", ".git", os.path.join("course", "nbgrader"))


# ====================================================================== settings

@dataclass
class Limits:
    """Time and resource limits of one submission. Seconds are wall-clock."""
    timeout: float = 900.0          # the whole submission (all children, all tests)
    test_timeout: float = 120.0     # the cases of one Test together (probe time only)
    case_timeout: float = 30.0      # one case
    cell_timeout: float = 60.0      # one notebook cell while the child sets up
    startup_timeout: float = 240.0  # interpreter + torch + graders import (not the student's time)
    memory: int = 4 * GiB           # RLIMIT_AS of the child; torch needs ~0.9 GiB of address space
    file_size: int = 64 * MiB       # RLIMIT_FSIZE: largest file the child may write
    output_tail: int = 4000         # characters of the student's stdout kept in the report
    max_deaths_per_test: int = 3    # after this many dead children in one Test, its other cases are not run

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Sandbox:
    """Which OS-level protections children get (Python-level ones are always on)."""
    uid_base: int | None = None     # root only: children run as uid_base + slot (no access to root's files)
    mount_ns: bool = False          # root only: a private mount namespace hides grader/solution folders
    mode: str = "auto"
    expose: list = field(default_factory=list)   # [(folder, [paths])]: inside the namespace, `folder`
    #   (e.g. /root, mode 0700) is covered by an empty tmpfs and only `paths` (the interpreter) are
    #   bound back, so a child that dropped root can still run Python installed under it

    @classmethod
    def detect(cls, mode: str = "auto") -> "Sandbox":
        if mode not in ("auto", "python"):
            raise ValueError(f"`sandbox` must be 'auto' or 'python', got {mode!r}.")
        if mode == "python" or not hasattr(os, "geteuid") or os.geteuid() != 0:
            return cls(None, False, mode)
        uid = int(os.environ.get("AUTOGRADER_CHILD_UID", "61000"))
        mount = _mount_ns_works()
        expose = _exposures(_interpreter_paths())
        if expose is None or (expose and not mount):
            # the interpreter is not readable by other users and cannot be made visible:
            # children keep root (the mount namespace and the Python-level policy still apply)
            return cls(None, mount, mode)
        return cls(uid, mount, mode, expose)

    def describe(self) -> dict:
        return {"mode": self.mode, "drops_root": self.uid_base is not None, "mount_namespace": self.mount_ns,
                "audit_hook": True, "import_blocker": True}


def _interpreter_paths() -> list[str]:
    return sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)})


def _others_can(path: str, bits: int) -> bool:
    try:
        return bool(os.stat(path).st_mode & bits)
    except OSError:
        return False


def _exposures(paths):
    """For each path, the highest ancestor other users cannot traverse: [(ancestor, [paths])].
    None when a path itself is not readable by others (no mount trick can fix that)."""
    import stat as st
    groups: dict[str, list[str]] = {}
    for p in paths:
        if not (_others_can(p, st.S_IROTH) and _others_can(p, st.S_IXOTH)):
            return None
        parts = Path(p).parts
        for i in range(1, len(parts)):
            anc = str(Path(*parts[:i]))
            if not _others_can(anc, st.S_IXOTH):
                groups.setdefault(anc, []).append(p)
                break
    return [(a, sorted(set(ps))) for a, ps in sorted(groups.items())]


@lru_cache(maxsize=1)
def _mount_ns_works() -> bool:
    if os.environ.get("AUTOGRADER_NO_MOUNT_NS") or not shutil.which("unshare") or not shutil.which("mount"):
        return False
    with tempfile.TemporaryDirectory() as d:
        try:
            proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "mount", "-t", "tmpfs",
                                   "-o", "ro,size=4k,mode=000", "l2ft-hidden", d],
                                  capture_output=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0


# ====================================================================== staged runtime

def _copy_tree(src: Path, dst: Path, ignore=()):
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", *ignore),
                        dirs_exist_ok=True, symlinks=False)


class Runtime:
    """A staged copy of what a child needs, made once per batch:

        BASE/runtime/autograder/   core, harness and graders (NOT reference/, variants/, tests/);
                                   owned by root and mode 0700 when grading as root, so a child
                                   (which has dropped root) cannot read the graders after import
        BASE/runtime/course/       the course library
        BASE/runtime/datasets/     fixtures (and the tiny model, if present): a COPY, so a child
                                   that could write there would still not change what the parent judges with
        BASE/runtime/boot.py       the child's entry point
        BASE/ctl-N/                the parent's files for child N (init, captured output), mode 0700
        BASE/scratch-N/            child N's working directory, HOME and TMPDIR
    """

    def __init__(self, lab: str, *, sandbox: Sandbox | None = None, root: Path | None = None,
                 base_dir: str | None = None, hide: tuple = ()):
        self.lab = lab
        self.root = Path(root or ROOT).resolve()
        self.sandbox = sandbox or Sandbox.detect()
        self.base = Path(tempfile.mkdtemp(prefix="l2ft-grading-", dir=base_dir or os.environ.get("AUTOGRADER_TMP")))
        self.stage = self.base / "runtime"
        self._counter = 0
        self._lock = threading.Lock()
        self.extra_hidden = tuple(str(Path(h).resolve()) for h in hide if h)
        self._build()

    # ---------------------------------------------------------------- building
    def _build(self):
        src = self.root / "autograder"
        ag = self.stage / "autograder"
        (ag / "graders").mkdir(parents=True)
        for p in src.glob("*.py"):
            shutil.copy2(p, ag / p.name)
        from .gradescope import lab_modules
        wanted = lab_modules(self.lab, self.root)
        for p in (src / "graders").glob("*.py"):
            if not re.fullmatch(r"lab\d\d", p.stem) or p.stem in wanted:
                shutil.copy2(p, ag / "graders" / p.name)
        _copy_tree(self.root / "course", self.stage / "course", ignore=("nbgrader",))
        _copy_tree(self.root / "datasets", self.stage / "datasets", ignore=("generators", "*.py"))
        (self.stage / "boot.py").write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(self.stage)!r})\n"
            "from autograder.isolation import child_main\n"
            "child_main(sys.argv[1])\n", encoding="utf-8")
        subprocess.run([sys.executable, "-I", "-m", "compileall", "-q", str(ag), str(self.stage / "course")],
                       capture_output=True)
        root = self.sandbox.uid_base is not None
        for dirpath, dirnames, filenames in os.walk(self.stage):
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
            os.chmod(dirpath, 0o755)
        for dirpath, dirnames, filenames in os.walk(ag):
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o600)
            os.chmod(dirpath, 0o700)
        os.chmod(self.base, 0o711 if root else 0o700)
        if root:
            for dirpath, dirnames, filenames in os.walk(self.base):
                os.chown(dirpath, 0, 0)
                for name in filenames:
                    os.chown(os.path.join(dirpath, name), 0, 0)

    def _protected(self) -> list[Path]:
        return [self.stage, self.base, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                Path(sys.executable).resolve().parent]

    def _hideable(self, paths) -> list[str]:
        """Existing folders among `paths` that do not contain the interpreter or the runtime
        (hiding those would stop the child from starting)."""
        keep = set()
        for c in paths:
            try:
                c = Path(c).resolve()
            except OSError:
                continue
            if not c.is_dir() or any(p == c or c in p.parents for p in self._protected()):
                continue
            keep.add(str(c))
        return sorted(keep)

    def hidden_paths(self) -> list[str]:
        """Folders a mount-namespace child sees as empty: grader sources, solutions, git
        history, the gradebook, and the instructor's input/output folders."""
        keep = self._hideable([self.root / h for h in HIDDEN_UNDER_ROOT] + list(self.extra_hidden))
        # a folder inside another hidden folder is hidden with it (and cannot be mounted on)
        return [k for k in keep if not any(o != k and k.startswith(o + os.sep) for o in keep)]

    def denied_paths(self) -> list[str]:
        """Paths the Python-level policy never lets a child read (even inside allowed prefixes)."""
        out = set(self._hideable([self.root / h for h in HIDDEN_UNDER_ROOT] + list(self.extra_hidden)))
        out |= {str((self.root / h).resolve()) for h in HIDDEN_UNDER_ROOT}
        out.add(str(self.stage / "autograder"))
        return sorted(out)

    def new_child_dirs(self, slot: int) -> tuple[Path, Path, int | None]:
        with self._lock:
            self._counter += 1
            n = self._counter
        ctl = self.base / f"ctl-{n}"
        scratch = self.base / f"scratch-{n}"
        ctl.mkdir(mode=0o700)
        scratch.mkdir(mode=0o700)
        (scratch / "tmp").mkdir(mode=0o700)
        uid = None
        if self.sandbox.uid_base is not None:
            uid = self.sandbox.uid_base + slot
            for p in (scratch, scratch / "tmp"):
                os.chown(p, uid, uid)
        return ctl, scratch, uid

    def close(self):
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ====================================================================== the submission (parent side)

@dataclass
class Cell:
    id: str
    kind: str            # "setup" | "solution" | "extra"
    source: str
    trusted: bool = False


@dataclass
class Submission:
    path: str
    lab: str
    cells: list[Cell] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fatal: str | None = None        # the notebook cannot be graded at all
    sha256: str = ""


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _meta(cell) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def release_notebook_path(lab: str, root: Path | None = None) -> Path | None:
    """The instructor's release notebook of `lab` (its locked cells are the trusted ones)."""
    folder = Path(root or ROOT) / "labs" / lab
    nbs = sorted(folder.glob("*.ipynb"))
    if not nbs:
        return None
    named = [p for p in nbs if p.stem == lab]
    return (named or nbs)[0]


@lru_cache(maxsize=16)
def _release_cells(path: str):
    from .notebook import is_setup, is_solution, read
    nb = read(path)
    setup, solution_ids, stub_names = [], [], {}
    for cell in nb.cells:
        m = _meta(cell)
        if is_setup(cell) and m.get("locked"):
            setup.append((str(m.get("grade_id")), _source(cell)))
        elif is_solution(cell):
            gid = str(m.get("grade_id"))
            solution_ids.append(gid)
            stub_names[gid] = defined_names(_source(cell))
    return tuple(setup), tuple(solution_ids), stub_names


def defined_names(source: str) -> list[str]:
    """Top-level function and class names a cell defines (empty if it does not parse)."""
    from .notebook import strip_magics
    try:
        tree = ast.parse(strip_magics(source))
    except (SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _definitions_only(source: str) -> str:
    """Of a cell the student added: its imports, defs, classes and literal constants only,
    so a helper they wrote is available but their experiments and plots do not run."""
    tree = ast.parse(source)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            keep.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            try:
                ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            keep.append(node)
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


def prepare(path, lab: str, *, root: Path | None = None) -> Submission:
    """Read a submitted notebook and list the cells the child will run. No student code runs here.

    * setup cells (grade_id imports*/setup*) that are locked in the release are replaced by
      the release's version (as nbgrader's autograde does) and run as trusted code;
    * solution cells (nbgrader solution: true) run in notebook order, each on its own, so a
      syntax error or exception in one does not remove the others' functions;
    * code cells the student added (no nbgrader metadata) contribute only their imports,
      defs, classes and literal constants;
    * test cells, demo cells and markdown are ignored.
    """
    from .notebook import NotebookError, is_setup, is_solution, read, strip_magics
    path = Path(path)
    sub = Submission(str(path), lab)
    try:
        raw = path.read_bytes() if path.is_file() else None
    except OSError as e:
        raw, sub.fatal = None, f"{path.name} cannot be read ({e.strerror})."
    if raw is None:
        sub.fatal = sub.fatal or f"{path.name} is not a file."
        return sub
    sub.sha256 = hashlib.sha256(raw).hexdigest()
    if len(raw) > MAX_NOTEBOOK:
        sub.fatal = f"{path.name} is {len(raw) / MiB:.0f} MiB; notebooks over {MAX_NOTEBOOK // MiB} MiB are not graded."
        return sub
    try:
        top = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        top = {}
    if not isinstance(top, dict):   # notebook.read assumes a JSON object
        sub.fatal = f"{path.name} is not an nbformat-4 notebook (its JSON is a {type(top).__name__})."
        return sub
    try:
        nb = read(path)
    except NotebookError as e:
        sub.fatal = str(e)
        return sub
    except RecursionError:
        sub.fatal = f"{path.name} is nested too deeply to be a notebook."
        return sub
    cells = nb.get("cells")
    if not isinstance(cells, list):
        sub.fatal = f"{path.name} has no list of cells."
        return sub

    rel = release_notebook_path(lab, root)
    trusted_ids: set[str] = set()
    release_solutions: tuple = ()
    if rel is not None:
        setup, release_solutions, _ = _release_cells(str(rel))
        for gid, src in setup:
            sub.cells.append(Cell(gid, "setup", strip_magics(src), trusted=True))
            trusted_ids.add(gid)

    seen_solutions = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        m = _meta(cell)
        gid = str(m.get("grade_id") or f"cell {i + 1}")
        src = _source(cell)
        if is_setup(cell):
            if gid not in trusted_ids:
                sub.cells.append(Cell(gid, "setup", strip_magics(src)))
        elif is_solution(cell):
            seen_solutions.append(gid)
            sub.cells.append(Cell(gid, "solution", strip_magics(src)))
        elif not m:
            try:
                kept = _definitions_only(strip_magics(src))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                sub.problems.append(f"an added cell ({gid}) does not parse; it was ignored.")
                continue
            if kept:
                sub.cells.append(Cell(f"added {gid}", "extra", kept))
    missing = [g for g in release_solutions if g not in seen_solutions]
    for g in missing:
        sub.problems.append(f"the solution cell `{g}` is missing (deleted, or its metadata was changed); "
                            "the tests of the functions it defines score 0.")
    if not seen_solutions:
        sub.problems.append("no solution cells were found: was this notebook made from the lab's release?")
    return sub


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


class _Died(Exception):
    def __init__(self, reason: str, cell: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.cell = cell


class _TimedOut(Exception):
    def __init__(self, cell: str | None = None):
        super().__init__("timed out")
        self.cell = cell


class _HarnessFailure(Exception):
    pass


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# ====================================================================== the child, seen from the parent

class _ChildProcess:
    def __init__(self, runtime: Runtime, sub: Submission, limits: Limits, skip: set[str], slot: int):
        self.runtime, self.sub, self.limits = runtime, sub, limits
        self.ctl, self.scratch, self.uid = runtime.new_child_dirs(slot)
        self.nonce = secrets.token_hex(16)
        self.buf = bytearray()
        self.eof = False
        self.proc = None
        self.current_cell = None
        self.last_untrusted = None
        self.cell_reports: list[dict] = []
        self.ready: dict | None = None
        self._start(skip)

    def init_payload(self, skip) -> dict:
        """Everything the child is told before it starts: the lab, the cells to run, limits
        and sandbox settings. No test inputs' expected values, no reference, no judges."""
        rt, lim, sb = self.runtime, self.limits, self.runtime.sandbox
        return {
            "protocol": PROTOCOL, "lab": rt.lab, "nonce": self.nonce, "stage": str(rt.stage),
            "scratch": str(self.scratch), "cmd_fd": self._fds[0], "res_fd": self._fds[1], "ppid": os.getpid(),
            "uid": self.uid, "hide": rt.hidden_paths() if sb.mount_ns else [],
            "expose": sb.expose if (sb.mount_ns and self.uid is not None) else [], "ctl": str(self.ctl),
            "deny": rt.denied_paths() + [str(rt.base)],
            "memory": int(lim.memory), "file_size": int(lim.file_size), "cpu": int(lim.timeout + 60),
            "cells": [asdict(c) for c in self.sub.cells if c.id not in skip],
        }

    def _start(self, skip):
        rt, lim = self.runtime, self.limits
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        sb = rt.sandbox
        self._fds = (cmd_r, res_w)
        init = self.init_payload(skip)
        init_path = self.ctl / "init.json"
        init_path.write_text(json.dumps(init), encoding="utf-8")
        self.out_path = self.ctl / "output.txt"
        out = open(self.out_path, "wb")
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.scratch), "TMPDIR": str(self.scratch / "tmp"),
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": str(self.scratch / ".matplotlib"), "XDG_CACHE_HOME": str(self.scratch / ".cache"),
            "HF_HOME": str(self.scratch / ".hf"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "TORCH_HOME": str(self.scratch / ".torch"),
        }
        cmd = [sys.executable, "-I", "-B", "-u", str(rt.stage / "boot.py"), str(init_path)]
        if sb.mount_ns:
            cmd = ["unshare", "--mount", "--propagation", "private", "--"] + cmd
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=env, cwd=str(self.scratch), pass_fds=(cmd_r, res_w),
                                         start_new_session=True, close_fds=True)
        finally:
            out.close()
            os.close(cmd_r)
            os.close(res_w)
        self.cmd_w, self.res_r = cmd_w, res_r
        self.started = time.monotonic()

    # ---------------------------------------------------------------- messages
    def _next(self, deadline: float) -> dict:
        """The next well-formed message carrying this child's nonce. Junk lines (a student
        writing to the pipe) are skipped; EOF or process exit raises _Died; the deadline _TimedOut."""
        while True:
            i = self.buf.find(b"\n")
            while i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                try:
                    msg = json.loads(line)
                except (ValueError, RecursionError):
                    msg = None
                if isinstance(msg, dict) and msg.get("n") == self.nonce:
                    return msg
                i = self.buf.find(b"\n")
            if len(self.buf) > MAX_MESSAGE:
                self.kill()
                raise _Died("sent more than 64 MiB in one message (the result is far too large)", self.current_cell)
            if self.eof:
                raise _Died(self._death_reason(), self.current_cell)
            left = deadline - time.monotonic()
            if left <= 0:
                raise _TimedOut(self.current_cell)
            r, _, _ = select.select([self.res_r], [], [], min(left, 1.0))
            if not r:
                continue
            data = os.read(self.res_r, 1 << 20)
            if not data:
                self.eof = True
            self.buf += data

    def _death_reason(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "closed the grading channel (the process was stopped)"
        if rc < 0:
            name = _signal_name(-rc)
            extra = {"SIGSEGV": " (a crash: often unbounded recursion)", "SIGKILL": " (out of memory, or stopped)",
                     "SIGXCPU": " (CPU time limit)", "SIGABRT": " (an abort inside a library)"}.get(name, "")
            return f"crashed with {name}{extra}"
        if rc == 0:
            return "exited early (exit code 0): your code ended the Python process, e.g. with os._exit()"
        return f"exited with code {rc}: your code ended the Python process (os._exit, or a fatal error)"

    def send(self, msg: dict):
        data = (json.dumps(msg) + "\n").encode()
        try:
            os.write(self.cmd_w, data)
        except OSError:
            raise _Died(self._death_reason(), self.current_cell) from None

    # ---------------------------------------------------------------- phases
    def boot(self, submission_deadline: float):
        """Wait for the child to import, run the cells and report ready."""
        lim = self.limits
        deadline = min(submission_deadline, time.monotonic() + lim.startup_timeout)
        while True:
            msg = self._next(deadline)
            t = msg.get("t")
            if t == "cell_start":
                self.current_cell = str(msg.get("id"))
                if not msg.get("trusted"):
                    self.last_untrusted = self.current_cell
                deadline = min(submission_deadline, time.monotonic() + lim.cell_timeout)
            elif t == "cell":
                self.cell_reports.append(msg)
                self.current_cell = None
            elif t == "setup_done":
                deadline = min(submission_deadline, time.monotonic() + lim.cell_timeout)
            elif t == "fatal":
                text = str(msg.get("message"))[:4000]
                if msg.get("after_student") and self.last_untrusted:
                    last = text.strip().splitlines()[-1:] or [""]
                    raise _Died(f"broke the grader's process ({last[0][:300]})", self.last_untrusted)
                raise _HarnessFailure(text)
            elif t == "ready":
                self.ready = msg
                return msg

    def probe(self, test: str, case: str, deadline: float) -> dict:
        req = secrets.token_hex(8)
        self.current_cell = None
        self.send({"t": "probe", "test": test, "case": case, "req": req})
        while True:
            msg = self._next(deadline)
            if msg.get("req") == req:
                return msg

    def close(self):
        try:
            self.send({"t": "bye"})
        except _Died:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for fd in ("cmd_w", "res_r"):
            v = getattr(self, fd, None)
            if v is not None:
                try:
                    os.close(v)
                except OSError:
                    pass
                setattr(self, fd, None)

    def output(self) -> str:
        try:
            with open(self.out_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
        shutil.rmtree(self.ctl, ignore_errors=True)


# ====================================================================== grading one submission

_JUDGE_LOCK = threading.RLock()


def _failed(case, message: str, hint: str | None = None):
    from .core import CaseResult
    return CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture, message, None, None,
                      hint if hint is not None else case.hint)


def _from_child(case, msg: dict):
    """Turn the child's answer for `case` into a CaseResult (judging observations here)."""
    from .core import CaseResult, judge_case
    kind = msg.get("kind")
    if kind == "obs":
        # judges may import libraries lazily (transformers) and share caches: one at a time
        with _JUDGE_LOCK:
            return judge_case(case, msg.get("obs"))
    if kind == "fail":
        def s(v):
            return None if v is None else v
        return CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture,
                          str(msg.get("message", ""))[:2000], s(msg.get("expected")), s(msg.get("got")),
                          msg.get("hint") if msg.get("hint") is not None else case.hint)
    if kind == "tampered":
        names = ", ".join(map(str, msg.get("names", [])[:8]))
        return _failed(case, f"your code replaced {names} while this case ran; the result cannot be trusted",
                       "Do not reassign attributes of torch, numpy, builtins, course or the grader.")
    return _failed(case, "the grading process sent an unreadable answer")


def _cell_problem(rep: dict) -> str | None:
    if rep.get("ok"):
        return None
    cid = rep.get("id")
    err = str(rep.get("error", ""))[:600]
    if rep.get("kind") == "syntax":
        return f"cell `{cid}` has a syntax error ({err}); it was not run, so what it defines is missing."
    if rep.get("trusted"):
        return f"the lab's setup cell `{cid}` failed in the grader ({err})."
    return f"cell `{cid}` raised {err}; definitions before that line were kept."


def grade_isolated(sub: Submission, runtime: Runtime, *, limits: Limits | None = None,
                   visible_only: bool = False, slot: int = 0, tests=None) -> Graded:
    """Grade one prepared submission: children run probes, this process judges."""
    from .core import TestResult, get_tests
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
            c = _ChildProcess(runtime, sub, limits, skip, slot)
            try:
                ready = c.boot(total_deadline)
            except _HarnessFailure as e:
                outputs.append(c.output())
                c.cleanup()
                if "could not set up the mount namespace" in str(e) and runtime.sandbox.mount_ns:
                    # this machine allows unshare but not these mounts: go on without them
                    # (uid drop and the Python-level policy still apply), and say so
                    runtime.sandbox.mount_ns = False
                    runtime.sandbox.expose = []
                    if runtime.sandbox.uid_base is not None and _exposures(_interpreter_paths()):
                        runtime.sandbox.uid_base = None
                    out.sandbox = runtime.sandbox.describe()
                    out.sandbox["mount_namespace_failed"] = str(e).strip().splitlines()[-1][:300]
                    continue
                raise
            except (_Died, _TimedOut) as e:
                outputs.append(c.output())
                c.cleanup()
                cell = e.cell or c.last_untrusted
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
            restored = ready.get("restored") or []
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
                    msg = child.probe(t.name, case.name, deadline)
                    result.cases.append(_from_child(case, msg))
                except _TimedOut:
                    result.cases.append(_failed(case, f"timed out after {time.monotonic() - start:.0f} s "
                                                      f"(an endless loop, or far too slow)",
                                                "Check the loop's stopping condition; the fixtures are small."))
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
    out.restarts = max(0, starts - 1)
    text = "".join(o for o in outputs if o)
    out.output = text[-limits.output_tail:] if limits.output_tail else ""
    out.seconds = round(time.monotonic() - t0, 3)
    return out


# ====================================================================== the child process

_BLOCK_IMPORT = ("autograder.graders", "autograder.reference", "autograder.variants", "autograder.tests",
                 "autograder.batch", "autograder.cli", "autograder.gradescope", "autograder.reports")


def _stub_reference_finder():
    """A meta-path finder that serves `autograder.reference` and its submodules as stubs:
    any attribute is a placeholder that refuses to be used. Lets a grader module import in
    the child without the reference implementations (judges never run there)."""
    import importlib.abc
    import importlib.machinery
    import types

    class Refused:
        def __init__(self, name):
            self._name = name

        def _no(self, *a, **k):
            raise RuntimeError(f"{self._name} (the reference) is not available in the student's process")

        __call__ = __getitem__ = __iter__ = __len__ = __bool__ = _no

        def __getattr__(self, item):
            if item.startswith("__"):
                raise AttributeError(item)
            return Refused(f"{self._name}.{item}")

    class StubModule(types.ModuleType):
        def __getattr__(self, item):
            if item.startswith("__"):
                raise AttributeError(item)
            return Refused(f"{self.__name__}.{item}")

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            m = StubModule(spec.name)
            m.__path__ = []
            return m

        def exec_module(self, module):
            pass

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "autograder.reference" or name.startswith("autograder.reference."):
                return importlib.machinery.ModuleSpec(name, Loader(), is_package=True)
            return None

    return Finder()


def _import_blocker(loaded):
    import importlib.abc

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(_BLOCK_IMPORT) or (name.startswith("autograder.") and name not in loaded) \
                    or name in ("_posixsubprocess", "_ctypes"):
                raise ImportError(f"`{name}` cannot be imported while your notebook is being graded")
            return None

    return Blocker()


def _install_audit_hook(*, read_prefixes, write_prefixes, deny_prefixes, allow_first, own_pid):
    """The child's file/process policy, as a sys.addaudithook hook (which Python code cannot
    remove). Everything it uses is bound here, so replacing builtins or os functions later
    does not change what it checks."""
    import posix
    import stat as _stat

    _lstat, _readlink, _getcwd = posix.lstat, posix.readlink, posix.getcwd
    _fsdecode = os.fsdecode
    _S_ISLNK = _stat.S_ISLNK
    _str, _bytes, _int, _type, _tuple, _len = str, bytes, int, type, tuple, len
    _PermissionError = PermissionError
    _O_ACCMODE = getattr(os, "O_ACCMODE", 3)
    _O_WRITE_BITS = os.O_CREAT | os.O_TRUNC | os.O_APPEND
    reads = _tuple(p.rstrip("/") + "/" for p in read_prefixes)
    writes = _tuple(p.rstrip("/") + "/" for p in write_prefixes)
    denies = _tuple(p.rstrip("/") + "/" for p in deny_prefixes)
    allow_first = _tuple(p.rstrip("/") + "/" for p in allow_first)
    proc_self = (f"/proc/{own_pid}/", "/proc/self/", "/proc/thread-self/")
    proc_ok = ("/proc/cpuinfo/", "/proc/meminfo/", "/proc/stat/", "/proc/sys/", "/proc/filesystems/",
               "/proc/loadavg/", "/proc/version/", "/proc/mounts/")
    always_denied = frozenset({
        "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
        "pty.spawn", "os.startfile", "os.kill", "os.killpg", "signal.pthread_kill", "os.symlink", "os.link",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
        "sys.setprofile", "resource.setrlimit", "resource.prlimit", "socket.connect", "socket.bind",
        "socket.sendto", "socket.sendmsg", "os.setuid", "os.setgid", "os.chroot", "sys.remote_exec",
        # ctypes: loading a library is allowed (torch.distributed loads libc at import time),
        # looking up a symbol, calling a foreign function or reading raw memory is not
        "os.add_dll_directory", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
        "ctypes.cdata/buffer", "ctypes.addressof", "ctypes.call_function", "ctypes.string_at",
        "ctypes.wstring_at",
    })
    write_events = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                              "os.utime", "os.chflags", "os.lchflags", "os.lchown", "os.setxattr",
                              "os.removexattr", "tempfile.mkstemp", "tempfile.mkdtemp", "shutil.rmtree",
                              "os.rename", "shutil.move", "shutil.copyfile", "shutil.copytree"})
    list_events = frozenset({"os.listdir", "os.scandir", "glob.glob", "os.listxattr", "os.getxattr"})
    blocked_imports = _BLOCK_IMPORT + ("_posixsubprocess", "_ctypes")

    def real(path):
        """realpath from C-level primitives only."""
        if _type(path) is _bytes:
            path = _fsdecode(path)
        if _type(path) is not _str:
            raise _PermissionError("the grader only allows plain str/bytes paths here")
        if not path.startswith("/"):
            path = _getcwd() + "/" + path
        todo = [p for p in path.split("/")[::-1] if p]
        done = []
        hops = 0
        while todo:
            part = todo.pop()
            if part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            cand = "/" + "/".join(done + [part])
            try:
                st = _lstat(cand)
                link = _S_ISLNK(st.st_mode)
            except OSError:
                link = False
            if link:
                hops += 1
                if hops > 40:
                    raise _PermissionError("too many symbolic links")
                target = _readlink(cand)
                if target.startswith("/"):
                    done = []
                todo.extend(p for p in target.split("/")[::-1] if p)
            else:
                done.append(part)
        return "/" + "/".join(done) + "/"

    def may_read(p):
        if p.startswith(writes) or p.startswith(allow_first):
            return True
        if p.startswith(denies):
            return False
        if p.startswith("/proc/"):
            return p.startswith(proc_self) or p.startswith(proc_ok)
        return p.startswith(reads)

    def check(path, write):
        if _type(path) is _int:
            return
        p = real(path)
        ok = p.startswith(writes) or p == "/dev/null/" if write else may_read(p)
        if not ok:
            raise _PermissionError(f"the grader does not let your code {'write' if write else 'read'} "
                                   f"{p[:-1]!r}")

    def hook(event, args):
        if event == "open":
            path, mode, flags = (args + (None, None, None))[:3]
            if _type(path) is _int:
                return
            if mode is None and _type(path) in (_str, _bytes) and not (
                    path.startswith("/") if _type(path) is _str else path.startswith(b"/")):
                raise _PermissionError("os.open needs an absolute path while grading")
            write = False
            if _type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode):
                write = True
            if _type(flags) is _int and ((flags & _O_ACCMODE) != 0 or flags & _O_WRITE_BITS):
                write = True
            check(path, write)
        elif event in always_denied:
            raise _PermissionError(f"{event} is not allowed while your notebook is being graded")
        elif event == "import":
            name = args[0] if args else ""
            if _type(name) is _str and name.startswith(blocked_imports):
                raise _PermissionError(f"`{name}` cannot be imported while your notebook is being graded")
        elif event in write_events:
            for a in args[:2] if event in ("os.rename", "shutil.move", "shutil.copyfile", "shutil.copytree") \
                    else args[:1]:
                if _type(a) in (_str, _bytes):
                    check(a, True)
        elif event in list_events:
            if args and _type(args[0]) in (_str, _bytes):
                check(args[0], False)
        elif event == "sqlite3.connect":
            db = args[0] if args else ":memory:"
            if db not in (":memory:", b":memory:", ""):
                check(db, True)

    sys.addaudithook(hook)


def _watch_targets(grader_module):
    import builtins
    import copy
    import math
    import operator
    import types
    import torch
    strict = [("builtins", builtins), ("torch", torch), ("torch.Tensor", torch.Tensor), ("math", math),
              ("copy", copy), ("operator", operator), ("json", json)]
    for name in ("torch.nn.functional", "torch.linalg", "torch.nn", "numpy", "numpy.random", "torch.testing"):
        m = sys.modules.get(name)
        if m is not None:
            strict.append((name, m))
    loose = [("autograder.core", sys.modules["autograder.core"]), (grader_module.__name__, grader_module)]
    for name, m in list(sys.modules.items()):
        if (name == "course" or name.startswith("course.")) and isinstance(m, types.ModuleType):
            loose.append((name, m))
            for k, v in list(vars(m).items()):
                if isinstance(v, type) and getattr(v, "__module__", "") == name:
                    loose.append((f"{name}.{k}", v))
    return strict, loose


def _make_watch(grader_module):
    """Snapshot library namespaces; `restore()` puts back anything the student replaced and
    returns the dotted names it had to fix."""
    import types
    strict, loose = _watch_targets(grader_module)
    snaps = []
    for label, obj in strict:
        snaps.append((label, obj, dict(vars(obj)), True, isinstance(obj, type)))
    for label, obj in loose:
        snaps.append((label, obj, dict(vars(obj)), False, isinstance(obj, type)))
    mods = {label: obj for label, obj in strict + loose
            if isinstance(obj, types.ModuleType) and obj is not grader_module}
    _vars, _setattr, _delattr, _callable, _isinstance, _type = vars, setattr, delattr, callable, isinstance, type
    _module = types.ModuleType
    _modules = sys.modules
    missing = object()

    _function = types.FunctionType
    wrappers = set()
    try:
        import torch
        wrappers.add(torch._disable_dynamo(lambda: None).__code__)
    except Exception:
        pass

    def harmless(old, new):
        """A library's behaviour-preserving wrapper of the original: importing torch._dynamo
        (transformers does) replaces torch.manual_seed with torch._disable_dynamo(manual_seed)."""
        return (_type(new) is _function and new.__dict__.get("__wrapped__") is old
                and new.__code__ in wrappers)

    def restore():
        changed = []
        for label, obj, snap, strict_, is_class in snaps:
            cur = _vars(obj)
            for k, v in list(snap.items()):
                c = cur.get(k, missing)
                if c is v:
                    continue
                if not strict_ and not (_callable(v) or _callable(c) or _isinstance(v, (_module, _type))):
                    continue
                if c is not missing and harmless(v, c):
                    snap[k] = c
                    continue
                changed.append(f"{label}.{k}")
                try:
                    _setattr(obj, k, v)
                except (TypeError, AttributeError):
                    pass
            if is_class:
                for k in [k for k in cur if k not in snap]:
                    changed.append(f"{label}.{k}")
                    try:
                        _delattr(obj, k)
                    except (TypeError, AttributeError):
                        pass
        for name, m in mods.items():
            if _modules.get(name) is not m:
                changed.append(f"sys.modules[{name!r}]")
                _modules[name] = m
        return changed

    return restore


def _probe_answer(case, ns, to_plain, Fail, NotPlain, student_frame):
    """Run one probe, mirroring autograder.core.run_case (without judging)."""
    try:
        obs = to_plain(case.probe(ns))
        return {"kind": "obs", "obs": obs}
    except Fail as f:
        return {"kind": "fail", "message": _safe_str(f.message), "expected": _plainish(f.expected, to_plain),
                "got": _plainish(f.got, to_plain), "hint": f.hint or case.hint}
    except NotPlain as e:
        return {"kind": "fail", "message": f"your function {_safe_str(e)}",
                "hint": "Return plain Python values or torch tensors."}
    except NotImplementedError:
        return {"kind": "fail", "message": "not implemented yet (the stub still raises NotImplementedError)",
                "hint": "Replace `raise NotImplementedError()` with your solution."}
    except RecursionError:
        return {"kind": "fail", "message": "your code raised RecursionError (unbounded recursion)", "hint": case.hint}
    except MemoryError:
        return {"kind": "fail", "message": "your code ran out of memory (MemoryError)", "hint": case.hint}
    except Exception as e:
        try:
            where = student_frame(e)
        except Exception:
            where = ""
        return {"kind": "fail", "message": f"your code raised {type(e).__name__}: {_safe_str(e)}{where}",
                "hint": case.hint}
    except SystemExit as e:
        return {"kind": "fail", "message": f"your code called sys.exit({_safe_str(e.code)}) while being graded",
                "hint": "Return a value (or raise an exception); never exit the interpreter."}
    except BaseException as e:
        return {"kind": "fail", "message": f"your code raised {type(e).__name__} while being graded",
                "hint": case.hint}


def _safe_str(x) -> str:
    try:
        s = x if type(x) is str else str(x)
        return s[:2000] if type(s) is str else "<unprintable>"
    except BaseException:
        return "<unprintable>"


def _plainish(x, to_plain):
    try:
        v = to_plain(x)
        json.dumps(v)
        return v
    except BaseException:
        return _safe_str(x)


def child_main(init_path: str):
    """Entry point of the child (run by BASE/runtime/boot.py). Trusted until `lockdown`."""
    with open(init_path, encoding="utf-8") as f:
        init = json.load(f)
    nonce = init["nonce"]
    res_fd, cmd_fd = init["res_fd"], init["cmd_fd"]
    _write, _dumps, _loads, _read = os.write, json.dumps, json.loads, os.read

    def send(msg):
        msg["n"] = nonce
        try:
            data = (_dumps(msg) + "\n").encode()
        except (TypeError, ValueError, RecursionError, OverflowError):
            data = (_dumps({"n": nonce, "req": msg.get("req"), "kind": "fail", "t": msg.get("t"),
                            "message": "the result could not be sent (not plain data)"}) + "\n").encode()
        if len(data) > MAX_MESSAGE - 1:
            data = (_dumps({"n": nonce, "req": msg.get("req"), "kind": "fail", "t": msg.get("t"),
                            "message": f"the result is too large ({len(data) // MiB} MiB)"}) + "\n").encode()
        view = memoryview(data)
        while view:
            k = _write(res_fd, view)
            view = view[k:]

    try:
        ns, probes, grader_module = _child_setup(init, send)
    except BaseException as e:  # the harness itself failed: tell the parent, never student code
        import traceback
        try:
            send({"t": "fatal", "message": "".join(traceback.format_exception(e))[-3000:],
                  "after_student": _PHASE["student"]})
        finally:
            os._exit(3)
    buf = bytearray()
    while True:
        i = buf.find(b"\n")
        if i < 0:
            try:
                data = _read(cmd_fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                os._exit(0)
            buf += data
            continue
        line = bytes(buf[:i])
        del buf[:i + 1]
        try:
            req = _loads(line)
        except ValueError:
            continue
        if not isinstance(req, dict) or req.get("t") == "bye":
            os._exit(0)
        if req.get("t") != "probe":
            continue
        key = (req.get("test"), req.get("case"))
        entry = probes.get(key)
        if entry is None:
            send({"t": "answer", "req": req.get("req"), "kind": "fail", "message": f"unknown case {key}"})
            continue
        case, restore, helpers = entry
        restore()                      # anything changed since the last case (threads, earlier probes)
        answer = _probe_answer(case, ns, *helpers)
        changed = restore()
        if changed:
            answer = {"kind": "tampered", "names": changed[:20]}
        answer.update({"t": "answer", "req": req.get("req")})
        send(answer)


def _child_setup(init, send):
    import importlib
    import resource

    # ---- 1. hide folders (root inside a private mount namespace)
    import shlex
    script = []
    for k, (folder, paths) in enumerate(init.get("expose", [])):
        keep = []
        for j, p in enumerate(paths):
            tmp = os.path.join(init["ctl"], f"expose-{k}-{j}")
            script += [f"mkdir {shlex.quote(tmp)}", f"mount --bind {shlex.quote(p)} {shlex.quote(tmp)}"]
            keep.append((p, tmp))
        script.append(f"mount -t tmpfs -o nosuid,nodev,size=64k,mode=755 l2ft-cover {shlex.quote(folder)}")
        for p, tmp in keep:
            script += [f"mkdir -p {shlex.quote(p)}", f"mount --move {shlex.quote(tmp)} {shlex.quote(p)}"]
    for p in init.get("hide", []):
        script.append(f"mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=000 l2ft-hidden {shlex.quote(p)}")
    if script:   # one shell for all of them: a mount costs a process start
        r = subprocess.run(["/bin/sh", "-ec", "\n".join(script)], capture_output=True)
        if r.returncode != 0:
            raise RuntimeError(f"could not set up the mount namespace: {r.stderr.decode(errors='replace')}")

    # ---- 2. trusted imports: torch, course, the lab's probes (reference stubbed)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()
                        and "editable" not in getattr(f, "__name__", "").lower()]
    stub_finder = _stub_reference_finder()
    sys.meta_path.insert(0, stub_finder)
    import torch  # noqa: F401
    import course  # noqa: F401
    from autograder import core
    lab = init["lab"]
    grader_module = importlib.import_module(f"autograder.graders.{lab}")
    tests = list(grader_module.TESTS)
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass

    # ---- 3. drop root; limits; die with the parent
    uid = init.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    mem, fsize, cpu = init["memory"], init["file_size"], init["cpu"]
    for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0),
                     (resource.RLIMIT_CPU, cpu)):
        try:
            resource.setrlimit(lim, (val, val))
        except (ValueError, OSError):
            pass
    if uid is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (512, 512))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != init["ppid"]:
        os._exit(4)
    os.chdir(init["scratch"])
    sys.setrecursionlimit(3000)

    # ---- 4. the lab's locked setup cells (from the release: trusted)
    ns = {"__name__": "__main__"}
    cells = init["cells"]
    for cell in cells:
        if cell["trusted"]:
            _run_cell(cell, ns, send)
    send({"t": "setup_done"})

    # ---- 5. lock down
    for name in [m for m in sys.modules if m.startswith(("autograder.graders", "autograder.reference"))]:
        del sys.modules[name]
    import autograder
    for attr in ("graders", "reference"):
        autograder.__dict__.pop(attr, None)
    sys.meta_path[:] = [f for f in sys.meta_path if f is not stub_finder]
    sys.meta_path.insert(0, _import_blocker(set(sys.modules)))
    try:
        import _posixsubprocess
        _posixsubprocess.fork_exec = _refuse
    except ImportError:
        pass
    if "subprocess" in sys.modules and hasattr(sys.modules["subprocess"], "_fork_exec"):
        sys.modules["subprocess"]._fork_exec = _refuse
    for owner in (torch, torch.TypedStorage):
        if "from_file" in vars(owner):
            delattr(owner, "from_file")
    restore = _make_watch(grader_module)
    scratch = os.path.realpath(init["scratch"])
    stage = os.path.realpath(init["stage"])
    reads = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), "/usr", "/lib", "/lib64", "/lib32", "/etc", "/sys", "/dev",
             "/bin", "/sbin"]
    try:
        import site
        reads += site.getsitepackages()
    except Exception:
        pass
    reads = [os.path.realpath(p) for p in reads if p]
    denies = [os.path.realpath(p) for p in init.get("deny", [])]
    staged = [os.path.join(stage, "course"), os.path.join(stage, "datasets")]
    _install_audit_hook(read_prefixes=reads, write_prefixes=[scratch], deny_prefixes=denies,
                        allow_first=staged, own_pid=os.getpid())

    # ---- 6. the student's cells, one at a time
    for cell in cells:
        if not cell["trusted"]:
            _run_cell(cell, ns, send)
    restored = restore()

    helpers = (core.to_plain, core.Fail, core.NotPlain, core._student_frame)
    probes = {(t.name, c.name): (c, restore, helpers) for t in tests for c in t.cases}
    send({"t": "ready", "restored": restored[:20]})
    return ns, probes, grader_module


def _refuse(*args, **kwargs):
    raise PermissionError("starting processes is not allowed while your notebook is being graded")


_PHASE = {"student": False}


def _run_cell(cell, ns, send):
    cid = cell["id"]
    if not cell["trusted"]:
        _PHASE["student"] = True
    send({"t": "cell_start", "id": cid, "trusted": cell["trusted"]})
    try:
        code = compile(cell["source"], f"<cell {cid}>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        msg = f"line {getattr(e, 'lineno', '?')}: {getattr(e, 'msg', str(e))}"
        send({"t": "cell", "id": cid, "ok": False, "kind": "syntax", "error": msg, "trusted": cell["trusted"]})
        return
    try:
        exec(code, ns)
    except BaseException as e:  # SystemExit, KeyboardInterrupt, anything: the cell ends, grading goes on
        line = ""
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == f"<cell {cid}>":
                line = f" (line {tb.tb_lineno})"
            tb = tb.tb_next
        name = type(e).__name__
        if isinstance(e, SystemExit):
            err = f"SystemExit{line}: the cell called sys.exit(), which ended the cell"
        else:
            err = f"{name}: {_safe_str(e)[:300]}{line}"
        send({"t": "cell", "id": cid, "ok": False, "kind": "runtime", "error": err, "trusted": cell["trusted"]})
        return
    send({"t": "cell", "id": cid, "ok": True, "trusted": cell["trusted"]})
