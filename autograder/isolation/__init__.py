"""The standalone harness, split along the trust boundary:

    driver.py   parent (trusted): stages the runtime, runs one sandboxed zygote per worker,
                sends (test, case) names, judges the plain data that comes back
    wire.py     the protocol: JSON lines, fds over the control socket; child data is untrusted
    limits.py   time and resource limits
    sandbox.py  the OS sandbox (bubblewrap namespaces, Landlock) and which course modules
                hold answers a lab may not use
    child.py    the child bootstrap that runs inside the sandbox (zygote + forked children)

    runtime = Runtime(lab)
    graded = grade_isolated(prepare(path, lab), runtime)
"""
from ..notebook import Cell, Submission, defined_names, prepare, release_notebook_path
from .driver import Graded, Runtime, grade_isolated
from .limits import GiB, MAX_MESSAGE, MiB, Limits
from .sandbox import Sandbox, WeakIsolation, answer_modules, hidden_modules, lab_modules

__all__ = ["Cell", "GiB", "Graded", "Limits", "MAX_MESSAGE", "MiB", "Runtime", "Sandbox", "Submission",
           "WeakIsolation", "answer_modules", "defined_names", "grade_isolated", "hidden_modules",
           "lab_modules", "prepare", "release_notebook_path"]
