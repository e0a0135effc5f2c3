"""The container tier, parent side: for machines that refuse namespaces (Gradescope's Docker
container, a Kubernetes pod: their default seccomp profiles forbid unshare, clone with
CLONE_NEW*, clone3 and mount), where bubblewrap cannot start but the grader runs as root
with Docker's default capabilities (CAP_SYS_CHROOT, CAP_SETUID, CAP_SETGID, CAP_KILL...).

The tree. Without mounts the child's view is a real directory: `system_root()` builds it
once per interpreter (cached under $AUTOGRADER_CONTAINER_ROOT, default
/var/cache/l2ft-autograder) from hard links (a copy where a link is impossible):

    ROOT/usr, /bin /lib* (links or trees as on the host)     what bubblewrap binds read-only
    ROOT/<interpreter and venv prefixes>                      the interpreter and site-packages
    ROOT/etc/{ld.so.cache, fonts, passwd, group, ...}         what the linker and libraries read
    ROOT/dev/{null,zero,full,random,urandom}                  where mknod is allowed
    ROOT/runs/ (0711)                                         one folder per Runtime, below

    ROOT/proc/cpuinfo                                         a plain copy (torch reads it); no procfs

Nothing else: no /proc, no /tmp, no /home, no /autograder, not the repository (a venv inside
the repository appears alone, at its path).
Files that are setuid/setgid, or writable by group or others, are left out. Each Runtime
adds ROOT/runs/<128-bit random name>/ (root, 0711): grader/ = the staged course library
(minus the lab's answer modules) and datasets, read-only; scratch-<slot>/ (0700, owned by
that worker's uid) = the only writable place. The zygote chroots into ROOT (as root) and
forks children that confine themselves (confine.py): their own uid per worker slot,
rlimits, no new privileges, the seccomp filter of seccomp_filter.py, and Landlock as well
where the kernel and the profile allow it.

The uids: a block of 256 per Runtime (AUTOGRADER_CONTAINER_UID, default 40000, upwards),
held with a lock file, skipped when a process already runs with one of them.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from . import seccomp_filter
from .child import remove_tree

CONFINE = Path(__file__).resolve().parent / "confine.py"
UID_BLOCK = 256
UID_BLOCKS = 64
NOFILE = 512
NPROC = 256
REQUIRED_CAPS = {0: "CAP_CHOWN", 1: "CAP_DAC_OVERRIDE", 3: "CAP_FOWNER", 5: "CAP_KILL", 6: "CAP_SETGID",
                 7: "CAP_SETUID", 18: "CAP_SYS_CHROOT"}
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts",
             "/etc/nsswitch.conf")
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
SKIP_UNDER_USR = ("share/doc", "share/man", "share/info", "src")


def cache_dir() -> Path:
    return Path(os.environ.get("AUTOGRADER_CONTAINER_ROOT") or "/var/cache/l2ft-autograder")


def uid_base() -> int:
    return int(os.environ.get("AUTOGRADER_CONTAINER_UID") or 40000)


# ---------------------------------------------------------------- can this machine run the tier?

def _effective_caps() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


@lru_cache(maxsize=2)
def unavailable() -> str:
    """'' when the container tier can run here, else why not."""
    if not sys.platform.startswith("linux"):
        return "the container tier needs Linux"
    if not seccomp_filter.supported():
        return f"no seccomp filter for this machine ({seccomp_filter.machine()})"
    if os.geteuid() != 0:
        return "the container tier needs root (to chroot and to run each child as its own unprivileged uid)"
    caps = _effective_caps()
    missing = [name for bit, name in REQUIRED_CAPS.items() if not caps >> bit & 1]
    if missing:
        return "the container tier needs " + ", ".join(missing)
    try:
        r = subprocess.run([sys.executable, "-I", "-S", "-B", str(CONFINE), "probe", str(uid_base()),
                            json.dumps(seccomp_filter.build())], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"the container tier's probe could not run ({e})"
    out = r.stdout.strip().splitlines()
    if r.returncode != 0 or not out:
        return f"the container tier's probe failed: {(r.stderr.strip().splitlines() or ['exit ' + str(r.returncode)])[-1]}"
    return "" if out[-1] == "ok" else out[-1]


# ---------------------------------------------------------------- the tree

def _sources() -> list[str]:
    """Host trees replicated into the root, at the same paths."""
    from .sandbox import interpreter_paths
    return ["/usr"] + [p for p in interpreter_paths() if p != "/usr" and not p.startswith("/usr/")]


def fingerprint() -> str:
    """Changes when the interpreter or its packages change (a new tree is built then)."""
    import site
    h = hashlib.sha256(sys.version.encode())
    h.update(os.path.realpath(sys.executable).encode())
    for p in _sources() + site.getsitepackages() + ["/usr/lib", f"/usr/lib/{os.uname().machine}-linux-gnu"]:
        h.update(p.encode())
        try:
            h.update(str(os.stat(p).st_mtime_ns).encode())
            if p in site.getsitepackages():
                for e in sorted(os.scandir(p), key=lambda e: e.name):
                    h.update(f"{e.name}:{e.stat(follow_symlinks=False).st_mtime_ns}".encode())
        except OSError:
            pass
    return h.hexdigest()[:16]


def _safe_file(st: os.stat_result) -> bool:
    return not (st.st_mode & (stat.S_ISUID | stat.S_ISGID))


def _replicate(src: str, root: Path) -> None:
    """src (a host tree) -> root/src by hard links, copying what cannot be linked."""
    src = os.path.realpath(src)
    top = root / src.lstrip("/")
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        if src == "/usr" and any(rel == s or rel.startswith(s + "/") for s in SKIP_UNDER_USR):
            dirnames[:] = []
            continue
        dest = top / rel if rel != "." else top
        dest.mkdir(parents=True, exist_ok=True)
        os.chmod(dest, (os.stat(dirpath).st_mode & 0o755) | 0o555)
        for name in list(dirnames):
            p = os.path.join(dirpath, name)
            if os.path.islink(p):           # a link to a folder: keep it a link
                dirnames.remove(name)
                os.symlink(os.readlink(p), dest / name)
        for name in filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(p), dest / name)
                elif stat.S_ISREG(st.st_mode) and _safe_file(st):
                    if st.st_mode & 0o022:    # writable by others: a private, read-only copy
                        shutil.copy2(p, dest / name)
                        os.chmod(dest / name, st.st_mode & 0o755)
                        continue
                    try:
                        os.link(p, dest / name)
                    except OSError:
                        shutil.copy2(p, dest / name)
            except OSError:
                continue


def _populate(root: Path) -> None:
    for src in _sources():
        _replicate(src, root)
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            os.symlink(os.readlink(top), root / top.lstrip("/"))
        elif os.path.isdir(top):
            _replicate(top, root)
    etc = root / "etc"
    etc.mkdir(mode=0o755, exist_ok=True)
    for f in ETC_FILES:
        if os.path.isdir(f) and not os.path.islink(f):
            _replicate(f, root)
        elif os.path.lexists(f):
            if os.path.islink(f):
                os.symlink(os.readlink(f), root / f.lstrip("/"))
            else:
                shutil.copy2(f, root / f.lstrip("/"))
    (etc / "passwd").write_text("root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    dev = root / "dev"
    dev.mkdir(mode=0o755, exist_ok=True)
    for name, (major, minor) in DEVICES.items():
        try:
            os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(dev / name, 0o666)
        except OSError:
            pass
    runs = root / "runs"
    runs.mkdir(exist_ok=True)
    os.chmod(runs, 0o711)
    os.chmod(root, 0o755)


def system_root() -> Path:
    """The cached tree for this interpreter (built on first use; a few seconds with hard links)."""
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    root = base / f"root-{fingerprint()}"
    if (root / ".complete").is_file():
        return root
    with open(base / ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if (root / ".complete").is_file():
            return root
        tmp = base / f".building-{secrets.token_hex(6)}"
        tmp.mkdir(mode=0o755)
        try:
            _populate(tmp)
            (tmp / ".complete").write_text(json.dumps({"fingerprint": root.name, "sources": _sources()}) + "\n")
            os.chmod(tmp / ".complete", 0o600)
            if root.exists():
                shutil.rmtree(root, ignore_errors=True)
            os.replace(tmp, root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for old in base.glob("root-*"):          # trees of an older interpreter, no longer in use
            if old != root and not any((old / "runs").iterdir() if (old / "runs").is_dir() else ()):
                shutil.rmtree(old, ignore_errors=True)
    return root


# ---------------------------------------------------------------- uids

def _uids_in_use() -> set[int]:
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                out.add(os.stat(f"/proc/{p}").st_uid)
            except OSError:
                pass
    return out


def _cpuinfo(root: Path) -> None:
    """ROOT/proc/cpuinfo: a plain copy of this machine's (torch's cpuinfo reads it; there is no
    /proc in the tree)."""
    try:
        data = Path("/proc/cpuinfo").read_bytes()
        (root / "proc").mkdir(mode=0o755, exist_ok=True)
        tmp = root / "proc" / f".cpuinfo-{secrets.token_hex(4)}"
        tmp.write_bytes(data)
        os.chmod(tmp, 0o444)
        os.replace(tmp, root / "proc" / "cpuinfo")
    except OSError:
        pass


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose uid is `uid`, from /proc."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.stat(f"/proc/{p}").st_uid != uid:
                continue
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(int(p))
    return out


def kill_uid(uid: int, seconds: float = 20.0) -> bool:
    """Kill every process of `uid` (from the parent, outside the tree): kill(-1) by a helper
    with that uid (it cannot reach anything else), until /proc shows none alive."""
    import time
    deadline = time.monotonic() + seconds
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        subprocess.run([sys.executable, "-I", "-S", "-B", str(CONFINE), "killuid", str(uid)],
                       capture_output=True, timeout=120)
        time.sleep(0.01)
    return True


# ---------------------------------------------------------------- one Runtime's place in the tree

class Run:
    """ROOT/runs/<token>/{grader, scratch-<slot>} for one Runtime, and its uids."""

    def __init__(self):
        self.root = system_root()
        self._lock = None
        self.first_uid = self._claim_uids()
        self.token = secrets.token_hex(16)
        self.dir = self.root / "runs" / self.token
        self.dir.mkdir(mode=0o711)
        os.chmod(self.dir, 0o711)
        self.stage = self.dir / "grader"
        _cpuinfo(self.root)
        self.inside = "/" + str(self.stage.relative_to(self.root))
        self.filter = seccomp_filter.build()
        self.slots: set[int] = set()

    def _claim_uids(self) -> int:
        locks = cache_dir() / "uids"
        locks.mkdir(mode=0o700, exist_ok=True)
        busy = _uids_in_use()
        base = uid_base()
        for block in range(UID_BLOCKS):
            first = base + block * UID_BLOCK
            if first + UID_BLOCK >= 65534:
                break
            if any(first <= u < first + UID_BLOCK for u in busy):
                continue
            f = open(locks / f"{first}.lock", "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            self._lock = f
            return first
        raise RuntimeError("no free block of uids for the container tier (AUTOGRADER_CONTAINER_UID)")

    def uid(self, slot: int) -> int:
        if not 0 <= slot < UID_BLOCK:
            raise ValueError(f"worker slot {slot} out of range (at most {UID_BLOCK} workers)")
        return self.first_uid + slot

    def scratch(self, slot: int) -> str:
        """A fresh scratch folder for `slot` (no process of its uid left), as the child sees it."""
        uid = self.uid(slot)
        kill_uid(uid)
        self.slots.add(slot)
        p = self.dir / f"scratch-{slot}"
        remove_tree(p)                     # the last child's tree, however deep, links not followed
        p.mkdir(mode=0o700)
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)   # chown the folder made, never a link
        try:
            os.fchown(fd, uid, uid)
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
        return "/" + str(p.relative_to(self.root))

    def command(self, argv: list[str]) -> list[str]:
        """The zygote's command line: chroot into the tree, then `argv` there."""
        return [sys.executable, "-I", "-S", "-B", str(CONFINE), "enter", str(self.root), "--"] + list(argv)

    def zygote_extra(self, slot: int, modules: dict) -> dict:
        """What the zygote's init adds in this tier: the child's confinement, and confine.py's
        source (imported there as `l2ft_confine`)."""
        uid = self.uid(slot)
        mods = dict(modules)
        mods["l2ft_confine"] = (CONFINE.read_text(encoding="utf-8"), False)
        return {"modules": mods, "pidns": False,
                "container": {"uid": uid, "gid": uid, "nofile": NOFILE, "nproc": NPROC, "filter": self.filter}}

    def close(self) -> None:
        for slot in sorted(self.slots):
            kill_uid(self.uid(slot))
        remove_tree(self.dir)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def main(argv: list[str]) -> int:
    """python -m autograder.isolation build   (setup.sh: the tree, made at image build time)"""
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: python -m autograder.isolation build\n\nBuild the container tier's tree for this "
              "interpreter (the Gradescope bundle's setup.sh runs it at image build time) and say whether "
              "the tier can run here.")
        return 0
    if argv[:1] == ["build"]:
        print(system_root())
        why = unavailable()
        print("container tier:", why or "available")
        return 0
    print("usage: python -m autograder.isolation build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
