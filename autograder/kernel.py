"""The in-kernel harness, called from the lab notebooks.

    check("lab01", "softmax_is_stable", globals())   # visible cases of one test: a report
    self_check("lab01", globals())                   # every visible case of the lab, with
                                                     # progress and a summary
    grade("lab01", "softmax_is_stable", globals())   # every case: points, as the cell's
                                                     # value (nbgrader partial credit)

check() and self_check() never raise in a learner's notebook, so one unfinished
exercise cannot stop the checks of the others. Under `nbgrader validate` (the
Validate button) check() raises when a visible case fails, so Validate reports
the cell as failing instead of reading the printed report as full credit.

grade() is what nbgrader's hidden test cells call. What the student's code writes
to stderr while it is tested (sys.stderr, logging handlers, file descriptor 2) is
captured: nbgrader gives 0 to a test cell with any stderr output. A cell that
earns nothing raises, so it scores 0 however the kernel displays values, and
grade() refuses to score in a kernel whose display or input machinery was changed
by notebook code. The kernel is still the student's: the isolated grader
(`python -m autograder grade`, then `python -m autograder gradebook-sync`) is the
grade to trust.

The reports are in the learner's language (autograder.messages): COURSE_LANG if set, else
the "language" of the notebook this kernel runs (the Chinese edition says "zh"), else
English. Only the words change; points never depend on the language.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from . import messages
from .core import get_tests, run_test
from .reports import test_text


class VisibleChecksFailed(AssertionError):
    """Raised by check() under `nbgrader validate` when a visible case fails."""


class NoPoints(AssertionError):
    """Raised by grade() when a test earns nothing: an error output is 0 points in nbgrader."""


class KernelTampered(RuntimeError):
    """Raised by grade() when notebook code changed how the kernel runs or displays cells."""


class CheckSummary:
    """What check() returns; its repr is the one line a learner sees last."""

    def __init__(self, result):
        self.result = result
        self.passed = sum(c.passed for c in result.cases)
        self.total = len(result.cases)

    @property
    def all_passed(self) -> bool:
        return self.passed == self.total

    def __repr__(self) -> str:
        if not self.total:
            return messages.text("check.none", name=self.result.name)
        verdict = messages.text("check.all_passed" if self.all_passed else "check.keep_going")
        return messages.text("check.summary", name=self.result.name, passed=self.passed, total=self.total,
                             verdict=verdict)


class SelfCheckSummary:
    """What self_check() returns: one CheckSummary per test of the lab."""

    def __init__(self, lab: str, checks: list[CheckSummary]):
        self.lab = lab
        self.checks = checks
        self.passed = sum(c.passed for c in checks)
        self.total = sum(c.total for c in checks)

    @property
    def all_passed(self) -> bool:
        return self.passed == self.total

    @property
    def failing(self) -> list[str]:
        return [c.result.name for c in self.checks if not c.all_passed]

    def _ipython_display_(self):
        """self_check() has printed the summary already; the cell shows it once."""

    def __repr__(self) -> str:
        if self.all_passed:
            return messages.text("check.lab_summary", lab=self.lab, passed=self.passed, total=self.total)
        return messages.text("check.lab_failing", lab=self.lab, passed=self.passed, total=self.total,
                             failing=", ".join(self.failing))


# ---------------------------------------------------------------- stderr capture

@contextlib.contextmanager
def _capture_stderr():
    """Send everything written to stderr into a sink while the student's code is tested:
    sys.stderr, logging handlers that hold the old stream (logging.basicConfig keeps a
    reference to the stream it was given), sys.__stderr__ and file descriptor 2 (os.write,
    C extensions; ipykernel forwards fd 2 to the notebook as stderr). Yields the sink."""
    sink = io.StringIO()
    old_streams = {id(s) for s in (sys.stderr, sys.__stderr__) if s is not None}
    moved = []
    for handler in _stream_handlers():
        if id(getattr(handler, "stream", None)) in old_streams:
            try:
                old = handler.stream
                handler.stream = sink
            except AttributeError:  # logging.lastResort reads sys.stderr each time: redirected below
                continue
            moved.append((handler, old))
    for s in (sys.stderr, sys.__stderr__):
        with contextlib.suppress(Exception):
            s.flush()
    fd_saved = fd_file = None
    try:
        fd_file = tempfile.TemporaryFile()
        fd_saved = os.dup(2)
        os.dup2(fd_file.fileno(), 2)
    except OSError:  # no fd 2 (embedded interpreters): the Python-level capture still holds
        fd_saved = None
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            yield sink
    finally:
        if sys.__stderr__ is not None:
            with contextlib.suppress(Exception):
                sys.__stderr__.flush()
        if fd_saved is not None:
            os.dup2(fd_saved, 2)
            os.close(fd_saved)
        if fd_file is not None:
            with contextlib.suppress(Exception):
                fd_file.seek(0)
                sink.write(fd_file.read().decode("utf-8", "replace"))
            fd_file.close()
        for handler, stream in moved:
            handler.stream = stream


def _stream_handlers():
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    seen = set()
    for lg in loggers:
        for h in list(lg.handlers):
            if isinstance(h, logging.StreamHandler) and id(h) not in seen:
                seen.add(id(h))
                yield h


# ---------------------------------------------------------------- kernel integrity

def _from_notebook(obj) -> bool:
    """True when `obj` (a function, method or callable object) was defined in notebook code."""
    for o in (obj, getattr(obj, "__self__", None), getattr(obj, "__func__", None), type(obj)):
        if o is None:
            continue
        mod = getattr(o, "__module__", None)
        if mod == "__main__":
            return True
        code = getattr(o, "__code__", None)
        name = getattr(code, "co_filename", "") or ""
        if name.startswith("<ipython-input") or "ipykernel_" in name:
            return True
    return False


def _ipythons_own(obj) -> bool:
    """True when `obj` (a transformer: a function, a class, an instance or a bound method)
    comes from IPython or ipykernel, as every transformer a fresh kernel holds does."""
    for o in (obj, getattr(obj, "__func__", None)):
        if o is None:
            continue
        mod = getattr(o, "__module__", None) or type(o).__module__
        if not isinstance(mod, str) or mod.split(".")[0] not in ("IPython", "ipykernel"):
            return False
    return True


PACKAGE = Path(__file__).resolve().parent          # the autograder package this module was loaded from


def foreign_modules() -> list[str]:
    """The grader's modules in sys.modules that were not loaded from this package's folder
    (a module put into sys.modules by hand, a folder added to the package's __path__). A
    whole shadow package beside the notebook replaces this module too, and a function
    assigned over one of this module's names runs instead of it, so neither can be seen
    from here: preflight reports the code that does either."""
    found = []
    for name, mod in list(sys.modules.items()):
        if name != "autograder" and not name.startswith("autograder."):
            continue
        where = getattr(mod, "__file__", None)
        paths = [where] if where else list(getattr(mod, "__path__", None) or [])
        if not paths or any(PACKAGE not in Path(p).resolve().parents and Path(p).resolve() != PACKAGE
                            for p in paths):
            found.append(f"module {name} is not the installed grader's")
    return found


def kernel_tampering(score: float = 12.5) -> list[str]:
    """What notebook code changed in the running IPython kernel that could change how a
    grade cell's value or errors reach nbgrader: transformers, hooks and formatters that
    are not IPython's own, and grader modules that are not the installed ones. A transformer
    that rewrites this very cell so that it never calls grade() escapes any check made
    here; `python -m autograder preflight` reports the code that sets one."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover (IPython ships with ipykernel)
        return []
    ip = get_ipython()
    if ip is None:
        return foreign_modules()
    found = foreign_modules()
    if getattr(ip, "ast_node_interactivity", "last_expr") not in ("last_expr", "last_expr_or_assign", "all", "last"):
        found.append(f"ast_node_interactivity is {ip.ast_node_interactivity!r}")
    if sys.displayhook is not getattr(ip, "displayhook", sys.displayhook):
        found.append("sys.displayhook was replaced")
    if type(ip.displayhook).__module__.split(".")[0] not in ("IPython", "ipykernel"):
        found.append("the shell's displayhook was replaced")
    try:
        data, _ = ip.display_formatter.format(score)
        if data.get("text/plain") != repr(score):
            found.append("the display formatter does not show numbers as they are")
    except Exception as e:  # a formatter that raises is a changed formatter
        found.append(f"the display formatter raised {type(e).__name__}")
    for event, callbacks in getattr(getattr(ip, "events", None), "callbacks", {}).items():
        if any(_from_notebook(cb) for cb in callbacks):
            found.append(f"a {event} hook defined in the notebook")
    mgr = getattr(ip, "input_transformer_manager", None)
    transforms = list(getattr(ip, "input_transformers_post", []) or [])
    for attr in ("cleanup_transforms", "line_transforms", "token_transformers"):
        transforms += list(getattr(mgr, attr, []) or [])
    if any(_from_notebook(t) or not _ipythons_own(t) for t in transforms):
        found.append("an input transformer that is not IPython's own")
    if any(_from_notebook(t) or not _ipythons_own(t) for t in getattr(ip, "ast_transformers", []) or []):
        found.append("an AST transformer that is not IPython's own")
    if getattr(ip, "CustomTB", None) is not None and _from_notebook(getattr(ip, "CustomTB")):
        found.append("a custom exception handler defined in the notebook")
    return found


# ---------------------------------------------------------------- the calls

def _test(lab, name):
    tests = get_tests(lab)
    test = tests.get(name)
    if test is None:
        raise ValueError(f"`name` must be a test of {lab}: {', '.join(tests)}; got {name!r}.")
    return test


def _run(lab, name, ns, visible_only):
    if not isinstance(ns, dict):
        raise ValueError(f"`ns` must be the notebook's globals() (a dict), got {type(ns).__name__}.")
    test = _test(lab, name)
    with _capture_stderr():
        return run_test(test, ns, visible_only=visible_only)


def _validating() -> bool:
    return os.environ.get("NBGRADER_EXECUTION") == "validate"


def _refuse_tampered_kernel(score: float = 12.5):
    tampered = kernel_tampering(score)
    if tampered:
        raise KernelTampered("this cell is not scored: " + "; ".join(tampered) +
                             ". Remove that code and run the notebook again.")


def check(lab: str, name: str, ns: dict) -> CheckSummary:
    """Run the visible cases of one test and print what passed and what to fix.

    Under `nbgrader validate` a failing visible case raises VisibleChecksFailed, so the
    Validate button reports the cell as failing; under nbgrader (validate or autograde) a
    kernel changed by notebook code raises KernelTampered."""
    result = _run(lab, name, ns, visible_only=True)
    print(test_text(result, title=messages.text("test.visible_title", name=name)))
    summary = CheckSummary(result)
    if os.environ.get("NBGRADER_EXECUTION"):   # autograde or validate: this cell's output is a grade
        _refuse_tampered_kernel()
    if _validating() and not summary.all_passed:
        raise VisibleChecksFailed(repr(summary))
    return summary


def self_check(lab: str, ns: dict, *, out=None) -> SelfCheckSummary:
    """Run every visible check of `lab` on the functions in `ns` (the notebook's globals()),
    printing a line per test as it finishes, the failing cases' reports, and a summary."""
    if not isinstance(ns, dict):
        raise ValueError(f"`ns` must be the notebook's globals() (a dict), got {type(ns).__name__}.")
    tests = get_tests(lab)  # validates `lab`
    out = out or sys.stdout
    n = len(tests)
    t = messages.text
    print(t("self_check.start" if n != 1 else "self_check.start_one", lab=lab, n=n), file=out, flush=True)
    missing = [name for name in _api(lab) if name not in ns]
    if missing:
        print(t("self_check.missing", names=", ".join(missing)), file=out, flush=True)
    checks, reports = [], []
    start = time.perf_counter()
    for i, (name, test) in enumerate(tests.items(), 1):
        with _capture_stderr():
            result = run_test(test, ns, visible_only=True)
        summary = CheckSummary(result)
        checks.append(summary)
        if not summary.total:
            mark = t("self_check.mark_none")
        else:
            mark = t("self_check.mark_pass" if summary.all_passed else "self_check.mark_fail")
        print(t("self_check.line", i=i, n=n, mark=mark, name=name, passed=summary.passed, total=summary.total),
              file=out, flush=True)
        if summary.total and not summary.all_passed:
            reports.append(test_text(result, title=t("test.visible_title", name=name)))
    total = SelfCheckSummary(lab, checks)
    if reports:
        print("\n" + t("self_check.what_to_fix") + "\n" + "\n\n".join(reports), file=out, flush=True)
    print(f"\n{total!r} ({time.perf_counter() - start:.1f} s)", file=out, flush=True)
    return total


def _api(lab: str) -> list[str]:
    """The functions the lab's graders call (the grader module's API dict)."""
    import importlib
    return list(getattr(importlib.import_module(f"autograder.graders.{lab}"), "API", {}) or {})


def grade(lab: str, name: str, ns: dict) -> float:
    """Run every case of one test; print the report; return the points earned.

    Raises NoPoints when the test earns nothing and KernelTampered when notebook code
    changed the kernel's display or input machinery (both: 0 points in nbgrader)."""
    result = _run(lab, name, ns, visible_only=False)
    print(test_text(result))
    score = float(result.score)
    _refuse_tampered_kernel(score)
    if score <= 0 < result.max_score:
        raise NoPoints(messages.text("grade.no_points", name=name, max_score=result.max_score))
    return score
