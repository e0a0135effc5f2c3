"""What the harnesses share: the collected cases, plain-data observations, results.

A lab's graders are pytest tests (autograder/graders/labNN/, run by autograder.plugin).
Collected, each test is a `Case` of a `Test` (one graded cell, its nbgrader grade id):

    probe(ns) -> observation   a probe of the lab's probes.py with the test's plain arguments:
                               runs the student's code (ns = their namespace) and returns
                               plain data (see `to_plain`)
    the pytest test            judges that observation, in the grading process only

The split is what lets the standalone harness run the probe in a sandboxed child and the
test in the parent. Probes never see expected values; a probed case waits as `Pending`
until `autograder.plugin.judge_pending` hands its observation to the test.
"""
from __future__ import annotations

import functools
import math
import os
import sys
import traceback
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Callable

import torch


class Fail(Exception):
    """A case's judgement: what was expected, what came back, what to try."""

    def __init__(self, message: str, *, expected: Any = None, got: Any = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.got = got
        self.hint = hint


class NotPlain(TypeError):
    """The student's code returned something that is not plain data."""


@dataclass(frozen=True)
class Case:
    """One collected grader test (autograder.plugin.describe_item)."""
    name: str                        # the pytest id: parametrize id, or the function's name without test_
    points: float
    probe: Callable[[dict], Any]     # the probe with its arguments, for the in-kernel harness
    call: tuple                      # (probe name, plain args, plain kwargs), for the sandboxed child
    visible: bool = False
    fixture: str | None = None
    hint: str | None = None          # default hint when the probe itself raises


@dataclass(frozen=True)
class Test:
    __test__ = False     # a graded test's definition, not a pytest test class to collect
    lab: str
    name: str            # equals the nbgrader grade_id of the test cell that runs it
    description: str
    cases: tuple[Case, ...]

    @property
    def points(self) -> float:
        return float(sum(c.points for c in self.cases))

    def visible_cases(self) -> tuple[Case, ...]:
        return tuple(c for c in self.cases if c.visible)


@dataclass
class CaseResult:
    name: str
    points: float
    max_points: float
    passed: bool
    visible: bool
    fixture: str | None = None
    message: str = ""
    expected: Any = None
    got: Any = None
    hint: str | None = None
    review: str | None = None        # for the instructor only (the record's "review"), never in feedback


@dataclass
class TestResult:
    lab: str
    name: str
    description: str
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def score(self) -> float:
        return round(float(sum(c.points for c in self.cases)), 4)

    @property
    def max_score(self) -> float:
        return round(float(sum(c.max_points for c in self.cases)), 4)

    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if not c.passed), None)

    def to_dict(self) -> dict:
        return {"lab": self.lab, "name": self.name, "description": self.description,
                "score": self.score, "max_score": self.max_score,
                "cases": [asdict(c) for c in self.cases]}


class Pending(CaseResult):
    """A pytest-judged case's observation (in `got`), waiting for autograder.plugin.judge_pending."""


# ---------------------------------------------------------------- plain data

TENSOR_TAG = "__tensor__"


def to_plain(obj: Any, _depth: int = 0) -> Any:
    """Convert an observation to plain data: None, bool, int, float, str, lists,
    dicts with str keys, and tensors as {"__tensor__": True, dtype, shape, data}.

    Only exact built-in types pass: an int subclass whose __eq__ always answers
    True is refused here, so it cannot fool a judge.
    """
    if _depth > 20:
        raise NotPlain("the returned value is nested more than 20 levels deep")
    t = type(obj)
    if obj is None or t in (bool, int, str):
        return obj
    if t is float:
        return obj
    if isinstance(obj, Enum) and t.__module__.startswith("course"):
        return str(obj.value)
    if t in (list, tuple):
        return [to_plain(x, _depth + 1) for x in obj]
    if t is dict:
        out = {}
        for k, v in obj.items():
            if type(k) is not str:
                raise NotPlain(f"dict keys must be str, got a key of type {type(k).__name__}")
            out[k] = to_plain(v, _depth + 1)
        return out
    if t is torch.Tensor or t is torch.nn.Parameter:
        x = torch.Tensor.detach(obj).to("cpu")
        return {TENSOR_TAG: True, "dtype": str(x.dtype).replace("torch.", ""),
                "shape": list(x.shape), "data": torch.Tensor.tolist(x)}
    if t.__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return to_plain(obj.item(), _depth + 1)
    if isinstance(obj, (int, float, str, list, tuple, dict, torch.Tensor)):
        raise NotPlain(f"returned a subclass of {t.__mro__[1].__name__} ({t.__name__}); return the plain type")
    raise NotPlain(f"returned an object of type {t.__name__}, which the grader cannot read")


def is_tensor(plain: Any) -> bool:
    return isinstance(plain, dict) and plain.get(TENSOR_TAG) is True


def as_tensor(plain: Any, what: str = "the result") -> torch.Tensor:
    """Rebuild a tensor from its plain form (or from a plain list/number)."""
    if is_tensor(plain):
        dtype = getattr(torch, plain["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise Fail(f"{what} has an unknown dtype {plain['dtype']!r}", got=plain["dtype"])
        x = torch.tensor(plain["data"], dtype=dtype)
        return x.reshape(plain["shape"])
    if isinstance(plain, (list, int, float)) and not isinstance(plain, bool):
        return torch.tensor(plain)
    raise Fail(f"{what} should be a tensor, got {describe(plain)}", got=describe(plain))


def describe(plain: Any) -> str:
    """A short human description of a plain observation, for messages."""
    if is_tensor(plain):
        return f"tensor(shape={tuple(plain['shape'])}, dtype={plain['dtype']})"
    if isinstance(plain, dict) and "__raised__" in plain:
        return f"{plain['__raised__']}: {plain['message']}"
    text = repr(plain)
    return text if len(text) <= 120 else text[:117] + "..."


def raised(exc: BaseException) -> dict:
    """The plain record of an exception the student's code raised, for judges
    that expect (or forbid) one."""
    return {"__raised__": type(exc).__name__, "message": str(exc)[:500],
            "is_value_error": isinstance(exc, ValueError)}


def is_raised(plain: Any) -> bool:
    return isinstance(plain, dict) and "__raised__" in plain


# What a case says of a function that is still the stub: not a wrong answer, nothing to compare yet.
STUB_MESSAGE = "not implemented yet (the stub still raises NotImplementedError)"
STUB_HINT = "Replace `raise NotImplementedError()` with your solution."


def is_stub(plain: Any) -> bool:
    """The record of the stub's NotImplementedError: the function is not written yet."""
    return is_raised(plain) and plain.get("__raised__") == "NotImplementedError"


# ---------------------------------------------------------------- judging helpers

def equal_mask(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise exact equality where NaN equals NaN (and each infinity itself)."""
    return (a == b) | (torch.isnan(a) & torch.isnan(b))


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when `a` and `b` have the same shape and exactly the same values, NaN
    matching NaN: how probes tell whether the student changed an input in place."""
    return tuple(a.shape) == tuple(b.shape) and bool(equal_mask(a, b).all())


def close(got: torch.Tensor, expected: torch.Tensor, *, atol=1e-5, rtol=1e-5, what="the result", hint=None):
    """Raise Fail unless `got` matches `expected` in shape and values (NaN == NaN)."""
    if tuple(got.shape) != tuple(expected.shape):
        raise Fail(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}",
                   expected=list(expected.shape), got=list(got.shape), hint=hint)
    g, e = got.double(), expected.double()
    if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
        # equal entries (including equal infinities and NaN == NaN) count as no difference
        diff = torch.where(equal_mask(g, e), torch.zeros_like(g), (g - e).abs().nan_to_num(nan=math.inf))
        idx = int(diff.argmax())
        raise Fail(f"{what} differs from the expected value (largest difference at flat index {idx})",
                   expected=_short(e.flatten()[idx]), got=_short(g.flatten()[idx]), hint=hint)


def _short(x: torch.Tensor):
    v = float(x)
    return v if math.isfinite(v) else str(v)


# ---------------------------------------------------------------- running in-process

def probe_case(case: Case, ns: dict) -> CaseResult:
    """Run the probe in this process: Pending (the observation in `got`) or the failure."""
    try:
        obs = to_plain(case.probe(ns))
    except Fail as f:  # a probe may fail early, e.g. a function is missing
        return _failed(case, f.message, f.expected, f.got, f.hint or case.hint)
    except NotPlain as e:
        return _failed(case, f"your function {e}", hint="Return plain Python values or torch tensors.")
    except NotImplementedError:
        return _failed(case, STUB_MESSAGE, hint=STUB_HINT)
    except RecursionError:
        return _failed(case, "your code raised RecursionError (unbounded recursion)", hint=case.hint)
    except MemoryError:
        return _failed(case, "your code ran out of memory (MemoryError)", hint=case.hint)
    except Exception as e:  # the student's code raised where it should not
        where = _student_frame(e)
        return _failed(case, f"your code raised {type(e).__name__}: {e}{where}", hint=case.hint)
    except SystemExit as e:  # sys.exit() in a probe must not end the grading (or the kernel's cell)
        return _failed(case, f"your code called sys.exit({e.code}) while being graded",
                       hint="Return a value (or raise an exception); never exit the interpreter.")
    except BaseException as e:  # KeyboardInterrupt and friends raised by the student's code
        return _failed(case, f"your code raised {type(e).__name__} while being graded", hint=case.hint)
    return Pending(case.name, 0.0, case.points, False, case.visible, case.fixture, got=obs, hint=case.hint)


def _failed(case, message, expected=None, got=None, hint=None) -> CaseResult:
    return CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture,
                      message, expected, got, hint)


def _student_frame(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "autograder" not in f.filename and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at line {f.lineno}: {f.line})" if f.line else ""


def run_test(test: Test, ns: dict, *, visible_only: bool = False) -> TestResult:
    """Probe every case of `test` in this process (the in-kernel harness) and judge them with pytest."""
    return run_tests([test], ns, visible_only=visible_only)[0]


def run_tests(tests: list[Test], ns: dict, *, visible_only: bool = False) -> list[TestResult]:
    """run_test for several tests of one lab, with the cases of all of them judged in one
    pytest run (a lab's self-check: one start-up instead of one per test)."""
    results = []
    for test in tests:
        result = TestResult(test.lab, test.name, test.description)
        result.cases = [probe_case(c, ns) for c in (test.visible_cases() if visible_only else test.cases)]
        results.append(result)
    pending = [r for r in results if any(type(c) is Pending for c in r.cases)]
    if pending:
        from .plugin import judge_pending
        judge_pending(pending[0].lab, pending)
    return results


# ---------------------------------------------------------------- registry

def labs() -> list[str]:
    """Labs that have graders (packages autograder/graders/labNN/ of pytest tests)."""
    from .graders import labs
    return labs()


def get_tests(lab: str) -> dict[str, Test]:
    """The graded cells of `lab` (collected from its pytest tests), by grade id."""
    if lab not in labs():
        raise ValueError(f"`lab` must be one of {', '.join(labs())}, got {lab!r}.")
    from .plugin import collect
    return dict(collect(lab))


LIBRARY_PACKAGES = ("course", "autograder")   # code a graded function must not come from
_LIBRARY_SUBMODULES = tuple(p + "." for p in LIBRARY_PACKAGES)


def _in_library(module_name) -> bool:
    return isinstance(module_name, str) and (module_name in LIBRARY_PACKAGES
                                             or module_name.startswith(_LIBRARY_SUBMODULES))


_LIBRARY_NAMES: list = [None, []]      # [what sys.modules looked like, the library's module names]


def _library_modules() -> list[str]:
    """The names in sys.modules under LIBRARY_PACKAGES. Scanning every loaded module (torch and
    transformers load thousands) for each function looked up took milliseconds a call, so the
    list is kept until sys.modules changes: its size or its newest entry (every import adds
    one at the end). A library module loaded from memory in the sandboxed child is told by
    its "<name>" filename before this list is asked; a course file by its folder after it."""
    modules = sys.modules
    key = (len(modules), next(reversed(modules), None))
    if _LIBRARY_NAMES[0] != key:
        _LIBRARY_NAMES[:] = [key, [n for n in list(modules) if _in_library(n)]]
    return _LIBRARY_NAMES[1]


@functools.cache
def _realpath(path: str) -> str:
    """os.path.realpath, remembered per path: the library's files do not move while a
    submission is graded, and a grading run asks about the same few hundred files for every
    function it looks up (uncached, that was most of a lab07 submission's probe time)."""
    return os.path.realpath(path)


def _library_file(filename) -> str | None:
    """The library module a code object's file belongs to, or None. Modules the isolated
    child loads from memory have filenames like "<autograder.core>"; files on disk count
    when they are a loaded library module's file or lie in the course package (which holds
    no student code; autograder/ does: its variants and tests are student-like code)."""
    if not isinstance(filename, str):
        return None
    if filename.startswith("<") and filename.endswith(">") and _in_library(filename[1:-1]):
        return filename[1:-1]
    try:
        real = _realpath(filename)
    except (TypeError, ValueError, OSError):
        return None
    for mod_name in _library_modules():
        f = getattr(sys.modules.get(mod_name), "__file__", None)
        if isinstance(f, str) and _realpath(f) == real:
            return mod_name
    course = sys.modules.get("course")
    top = getattr(course, "__file__", None)
    if isinstance(top, str) and real.startswith(os.path.dirname(os.path.realpath(top)) + os.sep):
        return "course." + os.path.splitext(os.path.basename(real))[0]
    return None


def library_origin(obj) -> str | None:
    """The course or autograder module a callable's code comes from, or None when it was
    written elsewhere (the student's notebook, torch, ...). Looks through what wraps a
    function: functools.partial, bound methods, staticmethod/classmethod, `__wrapped__`;
    a class counts by its own module, a callable instance by its class. A student's own
    function that merely calls course helpers is not the library's."""
    todo, seen = [obj], set()
    while todo and len(seen) < 50:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        try:
            module = o.__module__ if isinstance(o, type) else getattr(o, "__module__", None)
            if _in_library(module):
                return module
            globs = getattr(o, "__globals__", None)
            if isinstance(globs, dict) and _in_library(globs.get("__name__")):
                return globs["__name__"]
            found = _library_file(getattr(getattr(o, "__code__", None), "co_filename", None))
            if found:
                return found
            if isinstance(o, (functools.partial, functools.partialmethod)):
                todo.append(o.func)
            for attr in ("__func__", "__wrapped__"):
                inner = getattr(o, attr, None)
                if inner is not None:
                    todo.append(inner)
            if not isinstance(o, type) and not hasattr(o, "__code__") and type(o).__module__ != "builtins":
                todo.append(type(o))       # a callable instance: its class
        except Exception:                 # an object whose attributes raise is not the library's
            continue
    return None


def function(ns: dict, name: str):
    """The student's function `name` from their namespace, or a clear Fail.

    A function whose code lives in the course or autograder packages (imported, wrapped in
    a partial or a method, or a class of theirs) is not the student's work: both harnesses
    refuse it here, so `from course.generation import generate` scores nothing."""
    fn = ns.get(name)
    if fn is None:
        raise Fail(f"no function named `{name}` was found",
                   hint=f"Keep the name `{name}` from the stub; the grader calls it by name.")
    if not callable(fn):
        raise Fail(f"`{name}` is a {type(fn).__name__}, not a function",
                   hint=f"Define `{name}` with `def` as in the stub.")
    origin = library_origin(fn)
    if origin is not None:
        raise Fail(f"`{name}` comes from the module `{origin}`, not from your notebook",
                   hint=f"Write `{name}` yourself in the notebook; the course's own copy is what your function "
                        f"is compared with.")
    return fn
