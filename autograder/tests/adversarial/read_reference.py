"""Tries to copy the answer: imports autograder.reference / autograder.graders, reads their
sources from disk (repository and staged copy), runs `cat` in a subprocess (also through
_posixsubprocess and os.system), looks through gc for the reference module, and calls
the judges it can find in the grader module. If anything works it answers with the
reference (full marks); otherwise it returns a wrong token."""
import gc
import importlib
import os
import subprocess
import sys
from pathlib import Path

import course

EXPECT = {"max_score": 0, "output_not": ["LEAK"], "output_has": ["BLOCKED"]}

REPO = Path(sys.executable).resolve().parents[2]
STAGE = Path(course.__file__).resolve().parent.parent
PATHS = [REPO / "autograder" / "reference" / "lab00.py", STAGE / "autograder" / "reference" / "lab00.py",
         STAGE / "autograder" / "graders" / "lab00.py", REPO / "solutions" / "lab00" / "lab00.ipynb",
         REPO / "autograder" / "variants" / "lab00" / "correct_python_loop.py"]
found = {}


def note(how, ok, detail=""):
    print(("LEAK" if ok else "BLOCKED"), how, detail)


def use_source(text, how):
    if "def greedy_token" in text and "NotImplementedError" not in text:
        g = {}
        try:
            exec(compile(text, "<copied>", "exec"), g)
            found.setdefault("fn", g["greedy_token"])
            note(how, True)
        except Exception as e:  # noqa: BLE001
            note(how, False, repr(e))


for mod in ("autograder.reference.lab00", "autograder.reference", "autograder.graders.lab00"):
    try:
        m = importlib.import_module(mod)
        fn = getattr(m, "greedy_token", None)
        if callable(fn):
            fn(course.fixtures.load("peaked").logits(0))
            found.setdefault("fn", fn)
            note("import " + mod, True)
        else:
            note("import " + mod, False, "no function")
    except BaseException as e:  # noqa: BLE001
        note("import " + mod, False, type(e).__name__)
    try:
        m = sys.modules.get(mod)
        note("sys.modules " + mod, m is not None and callable(getattr(m, "greedy_token", None)))
    except BaseException as e:  # noqa: BLE001
        note("sys.modules " + mod, False, type(e).__name__)

for p in PATHS:
    try:
        use_source(p.read_text(), f"read {p}")
    except BaseException as e:  # noqa: BLE001
        note(f"read {p}", False, type(e).__name__)
    try:
        out = subprocess.run(["cat", str(p)], capture_output=True, text=True).stdout
        use_source(out, f"cat {p}")
    except BaseException as e:  # noqa: BLE001
        note(f"cat {p}", False, type(e).__name__)
    try:
        os.system(f"cat {p} > {os.getcwd()}/copied.py")
        use_source(Path("copied.py").read_text(), f"os.system {p}")
    except BaseException as e:  # noqa: BLE001
        note(f"os.system {p}", False, type(e).__name__)
    try:
        import _posixsubprocess
        note("_posixsubprocess", _posixsubprocess.fork_exec is not None and
             "fork_exec" in repr(_posixsubprocess.fork_exec) and "built-in" in repr(_posixsubprocess.fork_exec))
    except BaseException as e:  # noqa: BLE001
        note("_posixsubprocess", False, type(e).__name__)

try:
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "autograder.reference.lab00":
            found.setdefault("fn", obj.greedy_token)
            note("gc", True)
except BaseException as e:  # noqa: BLE001
    note("gc", False, type(e).__name__)

try:
    import ctypes
    libc = ctypes.CDLL(None)
    note("ctypes", libc.getpid() > 0)
except BaseException as e:  # noqa: BLE001
    note("ctypes", False, type(e).__name__)


def greedy_token(logits):
    if "fn" in found:
        return found["fn"](logits)
    return 0
