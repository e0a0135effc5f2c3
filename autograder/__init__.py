"""Hidden graders and the harnesses that run them.

One set of graders (autograder/graders/labNN/, pytest tests: see autograder/plugin.py)
serves two harnesses:

* in the kernel (nbgrader hidden test cells): `autograder.kernel.grade(...)`
  runs each test's probe on the notebook's globals and judges it with pytest there;
* standalone (`python -m autograder grade`): the probe runs in a sandboxed child
  on the student's extracted code and only plain data comes back; the parent
  process runs the tests, so expected values never enter the student's process.
"""
import sys as _sys

# jsonschema (which nbformat imports) builds dozens of grammar parsers at import time when the
# optional package rfc3987_syntax is installed (a Jupyter dependency brings it): several
# CPU-seconds in every grading process and every `check`, for the "iri" string formats that
# no notebook schema uses. Hidden from jsonschema here, unless something loaded it already.
if "rfc3987_syntax" not in _sys.modules and "jsonschema" not in _sys.modules:
    _sys.modules["rfc3987_syntax"] = None

__all__ = ["Case", "CaseResult", "Fail", "Test", "TestResult", "get_tests", "labs", "probe_case", "run_test"]


def __getattr__(name):
    # Loaded on first use: importing the package (as `python -m autograder check` does
    # before it prints anything) must not import torch through the core.
    if name in __all__:
        from . import core
        return getattr(core, name)
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
