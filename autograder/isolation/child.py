"""The child bootstrap: everything that runs inside the sandbox. Standard library only at import.

    python -I -B /grader/boot/l2ft_child.py CTL_FD      (the zygote, one per grading worker)

The zygote is trusted code: it reads its init line from the control socket (the lab, the
sources of the grader modules, which course modules are answers for this lab), imports
torch, the course library and the lab's probes with `autograder.reference` stubbed (the
grader modules come from memory: their files are not in the sandbox), runs the release's
setup cells once to warm the imports, then waits. For each submission the parent sends
`fork` with three file descriptors (command pipe, results pipe, output file); the zygote
forks a child, supervises it, and when it ends (or the parent asks) kills every other
process left in the sandbox, wipes /tmp, and reports the child's wait status on the
control socket, which the child never holds.

The child (forked, so torch is already imported) confines itself before any student code:
resource limits, death with the zygote, Landlock (writes only under its scratch; no
signals out of its domain), then the release's trusted setup cells; then it locks down:
the graders, the reference stub and the lab's answer modules leave sys.modules and cannot
be imported, an audit hook refuses processes, foreign calls, sockets and writes outside the
scratch, and library namespaces are snapshotted. Only then do the student's cells run, and
after them the probe loop: (test, case) in, one JSON line of plain data out.
"""
from __future__ import annotations

import json
import os
import signal
import sys

MiB = 1 << 20
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


def _import_blocker(loaded, hidden=()):
    import importlib.abc

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(_BLOCK_IMPORT) or (name.startswith("autograder.") and name not in loaded) \
                    or name in ("_posixsubprocess", "_ctypes") or name in hidden:
                raise ImportError(f"`{name}` cannot be imported while your notebook is being graded")
            return None

    return Blocker()


def _install_audit_hook(*, read_prefixes, write_prefixes, deny_prefixes, allow_first, own_pid, hidden=()):
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
    hidden = frozenset(hidden)

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
            if _type(name) is _str and (name.startswith(blocked_imports) or name in hidden):
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
    # The lab's probes and their helpers (submodules of the grader package, already out of
    # sys.modules here) and every class they define: nothing in them may change.
    for k, m in list(vars(grader_module).items()):
        if isinstance(m, types.ModuleType) and m.__name__.startswith(grader_module.__name__ + "."):
            strict.append((m.__name__, m))
            strict += [(f"{m.__name__}.{c}", v) for c, v in list(vars(m).items())
                       if isinstance(v, type) and getattr(v, "__module__", "") == m.__name__]
    loose = [("autograder.core", sys.modules["autograder.core"]), (grader_module.__name__, grader_module)]
    checks = sys.modules.get("autograder.checks")
    if checks is not None:     # and its classes whole (Ledger counts a pool's blocks for the probes)
        loose.append(("autograder.checks", checks))
        strict += [(f"autograder.checks.{k}", v) for k, v in list(vars(checks).items())
                   if isinstance(v, type) and getattr(v, "__module__", "") == "autograder.checks"]
    for name, m in list(sys.modules.items()):
        if (name == "course" or name.startswith("course.")) and isinstance(m, types.ModuleType):
            loose.append((name, m))
            # a course class is checked whole: methods, properties and other descriptors,
            # class attributes (a replaced `num_free` property lies to whoever reads it)
            strict += [(f"{name}.{k}", v) for k, v in list(vars(m).items())
                       if isinstance(v, type) and getattr(v, "__module__", "") == name]
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
    mods = {label: obj for label, obj in strict + loose     # the grader's own modules left sys.modules
            if isinstance(obj, types.ModuleType) and not label.startswith(grader_module.__name__)}
    _vars, _setattr, _delattr, _callable, _isinstance, _type = vars, setattr, delattr, callable, isinstance, type
    _hasattr = hasattr
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

    def descriptor(x):
        """A property, classmethod, staticmethod or any object with __get__/__set__/__delete__:
        not callable, yet it decides what an attribute read returns."""
        t = _type(x)
        return x is not missing and any(_hasattr(t, a) for a in ("__get__", "__set__", "__delete__"))

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
                if not strict_ and not (_callable(v) or _callable(c) or _isinstance(v, (_module, _type))
                                        or descriptor(v) or descriptor(c)):
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
    """Run one probe, mirroring autograder.core.probe_case."""
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


# ====================================================================== trusted modules from memory

def _memory_finder(sources: dict):
    """Serves `name -> source` (graders, core, answer modules a grader needs) from memory, so
    their files never have to be inside the sandbox."""
    import importlib.abc
    import importlib.machinery

    class Loader(importlib.abc.Loader):
        def __init__(self, name):
            self.name = name

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            src, _ = sources[self.name]
            exec(compile(src, f"<{self.name}>", "exec", dont_inherit=True), module.__dict__)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in sources:
                spec = importlib.machinery.ModuleSpec(name, Loader(name), is_package=sources[name][1])
                if sources[name][1]:
                    spec.submodule_search_locations = []
                return spec
            return None

    return Finder()


# ====================================================================== Landlock

_LL_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}


def _landlock(abi: int, write_paths, read_paths) -> str:
    """Confine this process (and what it starts): write only under `write_paths`, read only
    under `read_paths` + `write_paths`, no TCP, and (ABI >= 6) no signals or abstract unix
    sockets outside its domain. Returns '' or why it could not."""
    import ctypes
    nrs = _LL_SYSCALLS.get(os.uname().machine)
    if not abi or nrs is None:
        return "no landlock"
    create, add_rule, restrict = nrs
    libc = ctypes.CDLL(None, use_errno=True)
    EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
    write_bits = WRITE_FILE | (1 << 4) | (1 << 5) | sum(1 << b for b in range(6, 13))
    if abi >= 2:
        write_bits |= 1 << 13          # REFER
    if abi >= 3:
        write_bits |= 1 << 14          # TRUNCATE
    read_bits = READ_FILE | READ_DIR

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    attr = Attr(write_bits | read_bits, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    rs = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rs < 0:
        return f"landlock_create_ruleset failed (errno {ctypes.get_errno()})"
    try:
        def allow(path, bits):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                return
            try:
                if not os.path.isdir(path):
                    bits &= WRITE_FILE | READ_FILE | (1 << 14 if abi >= 3 else 0)
                rule = Beneath(bits, fd)
                libc.syscall(add_rule, ctypes.c_int(rs), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        for p in read_paths:
            allow(p, read_bits)
        for p in write_paths:
            allow(p, read_bits | write_bits)
        allow("/dev/null", read_bits | write_bits)
        if libc.prctl(38, 1, 0, 0, 0) != 0:          # PR_SET_NO_NEW_PRIVS
            return "no_new_privs failed"
        if libc.syscall(restrict, ctypes.c_int(rs), ctypes.c_uint32(0)) != 0:
            return f"landlock_restrict_self failed (errno {ctypes.get_errno()})"
    finally:
        os.close(rs)
    return ""


# ====================================================================== the zygote

def zygote_main(ctl_fd: int):
    import select
    import socket
    import traceback
    sock = socket.socket(fileno=ctl_fd)
    state = {"buf": bytearray(), "fds": []}

    def send(msg):
        sock.sendall((json.dumps(msg) + "\n").encode())

    def recv():
        """The next control line (and any fds that came with it); None at EOF."""
        while True:
            i = state["buf"].find(b"\n")
            if i >= 0:
                line = bytes(state["buf"][:i])
                del state["buf"][:i + 1]
                return json.loads(line)
            data, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(16 * 4))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    import array
                    a = array.array("i")
                    a.frombytes(payload[:len(payload) - len(payload) % a.itemsize])
                    state["fds"] += list(a)
            if not data:
                return None
            state["buf"] += data

    init = recv()
    if init is None:
        os._exit(0)
    try:
        ctx = _zygote_setup(init)
    except BaseException as e:
        send({"t": "fatal", "message": "".join(traceback.format_exception(e))[-3000:]})
        os._exit(3)
    send({"t": "zygote_ready", "pid": os.getpid()})
    pidns = init["pidns"]
    watch = init.get("scratch_limit")     # [bytes, entries, seconds] where scratch is a folder on disk
    while True:
        msg = recv()
        if msg is None or msg.get("t") == "bye":
            os._exit(0)
        if msg.get("t") != "fork" or len(state["fds"]) < 3:
            continue
        fds, state["fds"] = state["fds"][:3], state["fds"][3:]
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _child(ctx, *fds)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        send({"t": "forked", "pid": pid})
        pidfd = os.pidfd_open(pid)
        status, over = None, None
        while status is None:
            r, _, _ = select.select([sock, pidfd], [], [], watch[2] if watch else None)
            if watch and over is None:
                over = scratch_over(ctx["scratch_root"], watch[0], watch[1])
                if over:
                    _kill_all(pid, pidns)
            if sock in r:
                m = recv()
                if m is None:
                    _kill_all(pid, pidns)
                    os._exit(0)
                if m.get("t") == "kill":
                    _kill_all(pid, pidns)
            if pidfd in r or sock in r:
                try:
                    got, st = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    got, st = pid, 0
                if got == pid:
                    status = st
        os.close(pidfd)
        _kill_all(pid, pidns)
        _wipe(ctx["scratch_root"], {os.path.realpath(p) for p in ctx["init"]["read_paths"]})
        send({"t": "exit", "pid": pid, "status": status, "scratch": over,
              "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None})


def scratch_over(root: str, max_bytes: int, max_entries: int) -> str | None:
    """What the tree under `root` holds ("N MiB in F entries") once it is past `max_bytes`
    allocated (st_blocks: a preallocated file counts in full) or `max_entries` files, folders and
    links; None while it is within both. Iterative, links not followed, and it stops counting
    as soon as it is over, so a tree built to be slow to walk costs one bounded walk."""
    size, entries, pending = 0, 0, [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as it:
                for e in it:
                    entries += 1
                    try:
                        size += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
                    if e.is_dir(follow_symlinks=False):
                        pending.append(e.path)
                    if size > max_bytes or entries > max_entries:
                        return f"{size / (1 << 20):.0f} MiB in {entries} entries"
        except OSError:
            pass
    return None


_CONTAINER: dict = {}     # the container tier (no PID namespace): the child's uid and l2ft_confine


def _kill_all(pid: int, pidns: bool):
    """Every process the child left behind dies before the next child starts. Inside the
    sandbox's PID namespace that is every process but the zygote and the namespace's init."""
    import time
    if _CONTAINER:            # the container tier: every process of the child's own uid
        return _CONTAINER["module"].kill_all(_CONTAINER["uid"])
    if pidns:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(500):
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        if not pidns:
            return
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        if not others:
            return
        for p in others:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def remove_tree(path) -> None:
    """Delete `path` and everything under it, however deep, and never raise (what cannot be
    removed stays). No recursion and two open folders at a time: each folder's subfolders are
    moved up to sit directly under `path` (a rename, the same file system), its other entries
    unlinked, then it is removed; so a chain of folders thousands deep costs a loop, not a
    stack (shutil.rmtree raises RecursionError on it, which ignore_errors does not catch). A
    link is removed, never followed; folders made unreadable are given back their owner's
    rights where we own them. Run it once no process can still write under `path`."""
    import secrets
    import stat as st
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        if not st.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
        top = os.open(path, flags)
    except OSError:
        return
    try:
        pending = [None]                        # None: `path` itself; a name: a folder moved under it
        while pending:
            name = pending.pop()
            try:
                fd = os.dup(top) if name is None else os.open(name, flags, dir_fd=top)
            except PermissionError:
                try:
                    os.chmod(name, 0o700, dir_fd=top)
                    fd = os.open(name, flags, dir_fd=top)
                except OSError:
                    continue
            except OSError:
                continue
            try:
                try:
                    os.fchmod(fd, 0o700)            # our own folder made read-only: writable again
                except OSError:
                    pass
                with os.scandir(fd) as it:
                    entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                for entry, is_dir in entries:
                    try:
                        if not is_dir:
                            os.unlink(entry, dir_fd=fd)
                        elif name is None:
                            pending.append(entry)
                        else:
                            moved = f".l2ft-rm-{secrets.token_hex(8)}"
                            os.rename(entry, moved, src_dir_fd=fd, dst_dir_fd=top)
                            pending.append(moved)
                    except OSError:
                        pass
            except OSError:
                pass
            finally:
                os.close(fd)
            if name is not None:
                try:
                    os.rmdir(name, dir_fd=top)
                except OSError:
                    pass
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _wipe(folder: str, keep=()):
    """Empty `folder`, except the read-only binds in `keep` that lie inside it (an
    interpreter under /tmp) and the folders that lead to them."""
    for name in os.listdir(folder):
        p = os.path.join(folder, name)
        if p in keep:
            continue
        if any(k.startswith(p + os.sep) for k in keep):
            _wipe(p, keep)
        else:
            remove_tree(p)


def _zygote_setup(init: dict) -> dict:
    import ctypes
    import importlib
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)      # PR_SET_CHILD_SUBREAPER
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)       # PR_SET_DUMPABLE 0: children cannot ptrace us
    sys.path.insert(0, init["lib"])
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()
                        and "editable" not in getattr(f, "__name__", "").lower()]
    for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
        del sys.modules[name]
    sources = {k: tuple(v) for k, v in init["modules"].items()}
    mem = _memory_finder(sources)
    stub = _stub_reference_finder()
    sys.meta_path[:0] = [stub, mem]
    os.environ.update(init["env"])
    import torch
    torch.set_num_threads(1)
    import course  # noqa: F401
    from autograder import core  # noqa: F401
    grader_module = importlib.import_module(f"autograder.graders.{init['lab']}")
    importlib.import_module(f"autograder.graders.{init['lab']}.probes")    # the tests stay in the parent
    try:
        import numpy  # noqa: F401
        import matplotlib
        matplotlib.use("Agg")
    except ImportError:
        pass
    warm = {"__name__": "__main__"}
    for cell in init.get("warm_cells", []):      # the release's setup cells: imports load once here
        try:
            exec(compile(cell, "<warm-up>", "exec", dont_inherit=True), warm)
        except BaseException:
            pass
    del warm
    if init.get("container"):    # the container tier: confine.py, sent with the graders' sources
        _CONTAINER.update(module=importlib.import_module("l2ft_confine"), uid=int(init["container"]["uid"]))
    import gc
    gc.collect()
    return {"init": init, "grader": grader_module, "finders": (stub, mem), "scratch_root": init["scratch_root"],
            "sources": sources}


# ====================================================================== one child

def _child(ctx, cmd_fd: int, res_fd: int, out_fd: int):
    os.setsid()
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    # the first command line is this child's init (cells, nonce, limits)
    buf = bytearray()
    while b"\n" not in buf:
        data = os.read(cmd_fd, 1 << 20)
        if not data:
            os._exit(0)
        buf += data
    i = buf.index(b"\n")
    init = json.loads(bytes(buf[:i]))
    rest = bytes(buf[i + 1:])
    nonce = init["nonce"]
    _write, _dumps, _loads, _read = os.write, json.dumps, json.loads, os.read
    max_message = ctx["init"]["max_message"]

    def send(msg):
        msg["n"] = nonce
        try:
            data = (_dumps(msg) + "\n").encode()
        except (TypeError, ValueError, RecursionError, OverflowError):
            data = (_dumps({"n": nonce, "req": msg.get("req"), "kind": "fail", "t": msg.get("t"),
                            "message": "the result could not be sent (not plain data)"}) + "\n").encode()
        if len(data) > max_message - 1:       # the parent would stop reading it: say why instead
            size, limit = (f"{n / MiB:.1f}".removesuffix(".0") + " MiB" for n in (len(data), max_message))
            data = (_dumps({"n": nonce, "req": msg.get("req"), "kind": "fail", "t": msg.get("t"),
                            "message": f"the result of this case is {size}; the limit is {limit}"}) + "\n").encode()
        view = memoryview(data)
        while view:
            k = _write(res_fd, view)
            view = view[k:]

    try:
        ns, probes = _child_setup(ctx, init, send)
    except BaseException as e:
        import traceback
        try:
            send({"t": "fatal", "message": "".join(traceback.format_exception(e))[-3000:]})
        finally:
            os._exit(3)
    buf = bytearray(rest)
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
        entry = _called(probes, req)
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


def _probe_functions(module) -> dict:
    """A package-form lab's probes (autograder.plugin.probes_of): public functions of its
    probes module whose first parameter is `ns`."""
    if module is None:
        return {}
    out = {}
    for name, fn in vars(module).items():
        code = getattr(fn, "__code__", None)
        if not name.startswith("_") and code is not None and getattr(fn, "__module__", None) == module.__name__ \
                and code.co_argcount and code.co_varnames[0] == "ns":
            out[name] = fn
    return out


class _Call:
    """One case as the probe loop runs it: the named probe with plain arguments."""

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs, self.hint = fn, args, kwargs, None

    def probe(self, ns):
        return self.fn(ns, *self.args, **self.kwargs)


def _called(probes, req):
    """(case, restore, helpers) for a request that names a probe of the lab, or None."""
    fns, restore, helpers = probes[None]
    fn, args, kwargs = fns.get(req.get("probe")), req.get("args"), req.get("kwargs")
    if fn is None or type(args) is not list or type(kwargs) is not dict:
        return None
    return _Call(fn, args, kwargs), restore, helpers


def _child_setup(ctx, init, send):
    import ctypes
    import resource
    zinit = ctx["init"]
    grader_module = ctx["grader"]
    probe_fns = _probe_functions(sys.modules.get(f"{grader_module.__name__}.probes"))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG: die with the zygote
    libc.prctl(4, 1, 0, 0, 0)                   # dumpable again (our own /proc/self); the zygote is not
    scratch = os.path.join(zinit["scratch_root"], "work")
    os.makedirs(os.path.join(scratch, "tmp"), exist_ok=True)
    os.chdir(scratch)
    mem, fsize, cpu = init["memory"], init["file_size"], init["cpu"]
    for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0),
                     (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_NPROC, 256)):
        try:
            resource.setrlimit(lim, (val, val))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if _CONTAINER:            # the container tier: own uid for good, rlimits, seccomp (confine.py)
        _CONTAINER["module"].confine(zinit["container"], zinit["scratch_root"])
    landlock = _landlock(zinit["landlock"], [zinit["scratch_root"]], zinit["read_paths"]) \
        if zinit["landlock"] else "no landlock"
    sys.setrecursionlimit(3000)

    # ---- the lab's locked setup cells (from the release: trusted)
    ns = {"__name__": "__main__"}
    cells = init["cells"]
    for cell in cells:
        if cell["trusted"]:
            _run_cell(cell, ns, send)
    send({"t": "setup_done", "landlock": landlock})

    # ---- lock down
    from autograder import core
    helpers = (core.to_plain, core.Fail, core.NotPlain, core._student_frame)
    hidden = frozenset(zinit["hidden"])
    for name in [m for m in sys.modules if m.startswith(("autograder.graders", "autograder.reference"))
                 or m in hidden]:
        del sys.modules[name]
    import autograder
    import course
    for attr in ("graders", "reference"):
        autograder.__dict__.pop(attr, None)
    for name in hidden:
        course.__dict__.pop(name.split(".", 1)[1], None)
    sys.meta_path[:] = [f for f in sys.meta_path if f not in ctx["finders"]]
    ctx["sources"].clear()             # the graders' and answer modules' source text: reachable
    zinit["modules"].clear()           # through the zygote's frames, so gone before student code
    sys.meta_path.insert(0, _import_blocker(set(sys.modules), hidden))
    try:
        import _posixsubprocess
        _posixsubprocess.fork_exec = _refuse
    except ImportError:
        pass
    if "subprocess" in sys.modules and hasattr(sys.modules["subprocess"], "_fork_exec"):
        sys.modules["subprocess"]._fork_exec = _refuse
    import torch
    for owner in (torch, torch.TypedStorage, torch.UntypedStorage):
        if "from_file" in vars(owner):
            try:
                delattr(owner, "from_file")
            except (AttributeError, TypeError):
                pass
    restore = _make_watch(grader_module)
    reads = [os.path.realpath(p) for p in zinit["read_paths"]]
    _install_audit_hook(read_prefixes=reads, write_prefixes=[os.path.realpath(zinit["scratch_root"])],
                        deny_prefixes=[os.path.realpath(p) for p in zinit["deny"]], allow_first=[zinit["lib"]],
                        own_pid=os.getpid(), hidden=hidden)

    # ---- the student's cells, one at a time
    for cell in cells:
        if not cell["trusted"]:
            _run_cell(cell, ns, send)
    restored = restore()
    probes = {None: (probe_fns, restore, helpers)}
    send({"t": "ready", "restored": restored[:20]})
    return ns, probes


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: l2ft_child.py CTL_FD\n\nThe grading sandbox's zygote, started by the grader inside the "
              "sandbox with its control socket's descriptor (not run by hand).")
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    zygote_main(int(sys.argv[1]))
