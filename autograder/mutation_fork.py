"""A warm start for mutmut's test command: one pytest run per mutant, without paying for
torch's import each time.

mutmut (2.x) runs its test command once per mutant, a fresh process each time. Half of
such a run is importing torch, pytest and nbformat, which no mutant changes. This file
is both halves of a fork server (run as a script, so it loads no module of the course):

    python autograder/mutation_fork.py serve SOCKET [MODULE ...]
                                                         imports those libraries (or the
                                                         MODULEs) once, then forks one child
                                                         per request
    python autograder/mutation_fork.py run SOCKET -- ARGS...
                                                         mutmut's test command: the child runs
                                                         `pytest ARGS` in this command's folder,
                                                         with its environment and its stdout/
                                                         stderr, and this command exits with
                                                         pytest's exit code

The server imports only third-party libraries (it refuses to start if anything from
`course` or `autograder` got loaded), so every child imports the course and the graders
from disk, mutant included, as a fresh process would. When mutmut kills the `run` command
(its time limit: a planted endless loop), the server sees the connection close and kills
that child.
"""
from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import sys

# What every run imports, and what loading the tiny model imports lazily (transformers resolves
# its model classes and loading machinery on first use: seconds a run in the labs whose
# judges load it)
PRELOAD = ("torch", "pytest", "_pytest.assertion.rewrite", "nbformat", "jsonschema", "numpy", "safetensors.torch",
           "tokenizers", "transformers", "transformers.models.gpt2.modeling_gpt2", "transformers.modeling_utils",
           "transformers.core_model_loading", "transformers.integrations.hub_kernels", "transformers.masking_utils",
           "transformers.generation.utils", "transformers.tokenization_utils_fast", "torch.distributed.tensor")
LAZY = ("GPT2LMHeadModel", "GPT2Config", "AutoTokenizer", "PreTrainedTokenizerFast")     # transformers.<name>


def _recv(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return json.loads(data.decode()), list(fds)


def _child(request: dict, fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["pytest", *request["args"]]
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import pytest
    try:
        code = int(pytest.main(request["args"]))
    except SystemExit as e:          # pragma: no cover - pytest.main returns
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:            # pragma: no cover
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve(path: str, preload=PRELOAD) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[0] = root           # the course and the graders, imported from here by each child
    # as autograder/__init__.py does: jsonschema's optional IRI grammar costs seconds, unused
    sys.modules.setdefault("rfc3987_syntax", None)
    import importlib
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if "transformers" in sys.modules:
        for name in LAZY:
            getattr(sys.modules["transformers"], name, None)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("course", "autograder"))
    if loaded:
        raise SystemExit(f"the fork server loaded course modules ({loaded[:5]}); a mutant would not be seen")
    import threading
    if threading.active_count() != 1:     # a fork copies only this thread: a lock another one holds never frees
        raise SystemExit(f"the fork server has {threading.active_count()} threads after its imports; it forks only with one")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            request, fds = _recv(conn)
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                _child(request, fds)
            for fd in fds:
                os.close(fd)
            code = None
            while code is None:
                ready, _, _ = select.select([conn], [], [], 0.05)
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    code = os.waitstatus_to_exitcode(status)
                    break
                if ready and not conn.recv(1):       # `run` was killed: so is its pytest
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
            if code is not None:
                try:
                    conn.sendall(str(code).encode())
                except OSError:
                    pass


def run(path: str, args: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps({"cwd": os.getcwd(), "env": dict(os.environ), "args": args}).encode()
    conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    reply = b""
    while chunk := conn.recv(64):
        reply += chunk
    if not reply:
        print("mutation_fork: the server closed the connection without an exit code", file=sys.stderr)
        return 4
    code = int(reply.decode())
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print("usage: mutation_fork.py serve SOCKET [MODULE ...] | run SOCKET -- PYTEST_ARGS...\n\n"
              "mutmut's test runner for `python -m autograder.mutation` (not run by hand): serve imports torch and "
              "pytest once and forks a pytest per request on SOCKET; run sends one and exits with its status.")
        sys.exit(0)
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2], tuple(sys.argv[3:]) or PRELOAD)
    elif len(sys.argv) >= 4 and sys.argv[1] == "run" and sys.argv[3] == "--":
        sys.exit(run(sys.argv[2], sys.argv[4:]))
    else:
        sys.exit("usage: mutation_fork.py serve SOCKET [MODULE ...] | run SOCKET -- PYTEST_ARGS...")
