"""The container tier, process side. Standard library only: it runs three ways.

    python -I -S confine.py enter ROOT -- PYTHON ARGS...   the zygote's launcher: chroot ROOT, exec
    python -I -S confine.py probe UID FILTER_JSON          can this machine run the tier? ("ok")
    python -I -S confine.py killuid UID                    kill every process of UID (the parent's cleanup)

and, imported in the zygote as `l2ft_confine` (its source travels with the zygote's init,
like the graders'), `confine(cfg, scratch)` turns a freshly forked child into a confined
one before any student code runs, and `kill_all(uid)` is how the zygote ends every
process a child started:

  confine: the scratch folder becomes the child's, then rlimits (open files, processes),
  PR_SET_NO_NEW_PRIVS, setgroups([]) + setresgid + setresuid to the worker's own
  unprivileged ids (the kernel drops every capability with them; no way back: NO_NEW_PRIVS
  makes setuid binaries powerless, and setuid(0) fails, which it checks), the parent-death
  signal again (a uid change clears it), and the seccomp filter built by the parent
  (seccomp_filter.py), installed for all threads. Any failure raises: the child never
  runs student code half-confined.

  kill_all: a helper forked with the child's uid calls kill(-1, SIGKILL), which reaches
  every process of that uid (and nothing else); the zygote, a child subreaper, reaps until
  it has no child left: every process the child started descends from it, so none is
  left then. No /proc is needed (the chroot has none).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 38, 22
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, SECCOMP_MODE_FILTER = 1, 1, 2
_SECCOMP_NR = {"x86_64": 317, "aarch64": 277}


class ConfineError(RuntimeError):
    pass


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def no_new_privs() -> None:
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise ConfineError(f"PR_SET_NO_NEW_PRIVS failed (errno {ctypes.get_errno()})")


def install_filter(prog) -> None:
    """Install a classic-BPF seccomp filter ((code, jt, jf, k) rows) on every thread."""

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                    ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    rows = (SockFilter * len(prog))(*[SockFilter(int(c), int(t), int(f), int(k)) for c, t, f, k in prog])
    fprog = SockFprog(len(prog), rows)
    libc = _libc()
    nr = _SECCOMP_NR.get(os.uname().machine)
    if nr is not None and libc.syscall(nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                                       ctypes.byref(fprog)) == 0:
        return
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise ConfineError(f"the seccomp filter could not be installed (errno {ctypes.get_errno()})")


def drop_to(uid: int, gid: int) -> None:
    """Become uid:gid for good (no groups, no capabilities), or raise."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise ConfineError("the unprivileged ids did not stick")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise ConfineError("setuid(0) succeeded after dropping privileges")


def confine(cfg: dict, scratch: str | None = None) -> None:
    """Confine this (forked, still root) child: see the module docstring. `cfg` comes from the
    parent: uid, gid, nofile, nproc, filter."""
    import resource
    uid, gid = int(cfg["uid"]), int(cfg["gid"])
    if uid <= 0 or gid <= 0:
        raise ConfineError("the child must get an unprivileged uid and gid")
    if scratch:
        for dirpath, dirnames, filenames in os.walk(scratch):
            os.chown(dirpath, uid, gid)
            for name in filenames:
                os.chown(os.path.join(dirpath, name), uid, gid)
    for lim, val in ((resource.RLIMIT_NOFILE, int(cfg.get("nofile", 512))),
                     (resource.RLIMIT_NPROC, int(cfg.get("nproc", 256))),
                     (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(lim, (val, val))
    no_new_privs()
    drop_to(uid, gid)
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise ConfineError("PR_SET_PDEATHSIG failed")
    if os.getppid() == 1:            # the zygote died while we dropped privileges
        os._exit(70)
    install_filter(cfg["filter"])


def signal_uid(uid: int) -> None:
    """SIGKILL every process of `uid`, from a helper that takes that uid: kill(-1) reaches the
    processes whose real or saved uid is `uid` and nothing else (the caller stays root)."""
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
            os._exit(0)
        except BaseException:
            os._exit(2)
    while True:
        try:
            got, _ = os.waitpid(helper, 0)
        except ChildProcessError:
            return
        if got == helper:
            return


def kill_all(uid: int, seconds: float = 10.0) -> bool:
    """In the zygote (a child subreaper whose only descendants are the child's): SIGKILL every
    process of `uid`, then reap until no descendant is left. Whatever a killed process leaves
    is reparented to us, so "no child left" means every process the child started is gone.
    False if some did not go within `seconds` (the caller's parent then kills by /proc)."""
    deadline = time.monotonic() + seconds
    next_kill = 0.0
    while True:
        now = time.monotonic()
        if now >= next_kill:                # again now and then: a helper the child's processes
            signal_uid(uid)                 # killed first, or a fork that raced the signal
            next_kill = now + 0.2
        try:
            while True:
                got, _ = os.waitpid(-1, os.WNOHANG)
                if got == 0:
                    break
        except ChildProcessError:
            return True
        if now > deadline:
            return False
        time.sleep(0.002)


def enter(root: str, argv: list[str]) -> None:
    """The zygote's launcher: chroot into the staged tree and exec the interpreter there."""
    os.chroot(root)
    os.chdir("/")
    os.execv(argv[0], argv)


def probe(uid: int, prog) -> str:
    """'' when this process can chroot, drop to `uid` for good and install the filter, and
    the filter then refuses a socket; else why not."""
    import socket
    import tempfile
    empty = tempfile.mkdtemp(prefix="l2ft-probe-")
    try:
        pid = os.fork()
        if pid == 0:
            code = 10
            try:
                os.chroot(empty)
                os.chdir("/")
                code = 11
                no_new_privs()
                drop_to(uid, uid)
                code = 12
                install_filter(prog)
                code = 13
                try:
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                except PermissionError:
                    os._exit(0)
            except BaseException:
                pass
            os._exit(code)
        _, st = os.waitpid(pid, 0)
    finally:
        os.rmdir(empty)
    code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1
    return {0: "", 10: "chroot is not allowed (CAP_SYS_CHROOT)",
            11: "could not drop to an unprivileged uid (CAP_SETUID/CAP_SETGID)",
            12: "seccomp filters cannot be installed", 13: "the seccomp filter did not refuse a socket"}.get(
        code, f"the probe died ({st})")


USAGE = "usage: confine.py enter ROOT -- ARGV | probe UID FILTER | killuid UID"


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE + "\n\nThe container tier's confinement (run by the grader, not by hand): enter chroots into the "
              "tree and runs ARGV; probe reports whether a child could confine itself as UID; killuid signals "
              "every process of UID.")
        return 0
    if argv[:1] == ["enter"] and "--" in argv:
        i = argv.index("--")
        enter(argv[1], argv[i + 1:])
    if argv[:1] == ["probe"]:
        why = probe(int(argv[1]), json.loads(argv[2]))
        print(why or "ok")
        return 0
    if argv[:1] == ["killuid"]:         # from outside the tree: the caller checks /proc and retries
        signal_uid(int(argv[1]))
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
