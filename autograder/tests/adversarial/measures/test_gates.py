"""Every course function that computes a lab's graded answer is hidden while that lab is graded.

For each lab, every function of every `course` module (module level, or on a class) whose
name is in the lab's API is a candidate. One whose code lives in a module gated for the
lab (ANSWERS_FOR of that lab or a later one) is out of reach. Any other is run through the
lab's visible cases in this process, in the reference's namespace with the candidate under
the graded name: if every visible case that depends on that name observes what the
reference observes, the candidate IS the answer, ungated."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import course
from autograder.core import Pending, get_tests, probe_case
from autograder.isolation.sandbox import answer_modules

LABS = ("lab00", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07")


def course_modules() -> dict[str, types.ModuleType]:
    return {m.name: importlib.import_module(f"course.{m.name}") for m in pkgutil.iter_modules(course.__path__)}


def _params(sig: str) -> list[str]:
    return [p.strip().split("=")[0].strip() for p in sig.strip("()").split(",") if p.strip() not in ("*", "")]


def candidates(lab: str, modules: dict) -> list[tuple[str, str, object]]:
    """(graded name, where it was found, function) for each course function with a graded
    name and the API's parameter names."""
    api = importlib.import_module(f"autograder.graders.{lab}").API
    out = []
    for where, mod in modules.items():
        holders = [(where, mod)] + [(f"{where}.{k}", v) for k, v in vars(mod).items() if isinstance(v, type)]
        for label, holder in holders:
            for name, sig in api.items():
                fn = getattr(holder, name, None)
                if not callable(fn):
                    continue
                try:
                    params = [p for p in inspect.signature(fn).parameters]
                except (TypeError, ValueError):
                    continue
                if params == _params(sig):
                    out.append((name, label, fn))
    return out


def gated(fn, lab: str) -> bool:
    """The module the function's code comes from is hidden while `lab` is graded."""
    owner = answer_modules().get((getattr(fn, "__module__", "") or "").rsplit(".", 1)[-1])
    return (getattr(fn, "__module__", "") or "").startswith("course.") and owner is not None and owner >= lab


def _as_notebook(obj):
    """obj as the student's own: a function compiled in a cell that calls it (a class: a
    subclass written in a cell), so the graders' library check does not refuse it."""
    ns = {"_impl": obj}
    if isinstance(obj, type):
        exec(compile(f"class {obj.__name__}(_impl):\n    pass\n", "<cell>", "exec"), ns)
        return ns[obj.__name__]
    exec(compile("def _own(*args, **kwargs):\n    return _impl(*args, **kwargs)\n", "<cell>", "exec"), ns)
    return ns["_own"]


def _seen(case, ns):
    r = probe_case(case, dict(ns))
    return ("obs", repr(r.got)) if type(r) is Pending else ("fail", r.message)


def answers_like_the_reference(lab: str, name: str, fn) -> bool:
    """`fn` under `name` makes every visible case that depends on `name` observe what the
    reference makes it observe (and at least one case depends on it)."""
    ref = importlib.import_module(f"autograder.reference.{lab}")
    base = {"__name__": "__main__"}
    for k in getattr(ref, "__all__", [k for k in vars(ref) if not k.startswith("_")]):
        v = getattr(ref, k)
        base[k] = _as_notebook(v) if callable(v) and not isinstance(v, type) or isinstance(v, type) \
            and not issubclass(v, BaseException) else v
    without = {k: v for k, v in base.items() if k != name}
    swapped = {**base, name: _as_notebook(fn)}
    probes = importlib.import_module(f"autograder.graders.{lab}.probes")
    depends = 0
    for test in get_tests(lab).values():
        for case in test.visible_cases():
            probe = getattr(probes, case.call[0], None)
            if name not in repr(case.call) and (probe is None or name not in inspect.getsource(probe)):
                continue                       # the probe never names `name`
            expected = _seen(case, base)
            if _seen(case, without) == expected:
                continue                       # this case does not call `name`
            depends += 1
            if _seen(case, swapped) != expected:
                return False
    return depends > 0


def ungated_answers(lab: str, modules: dict) -> list[str]:
    return [f"{where}.{name} (code in {getattr(fn, '__module__', '?')})" for name, where, fn in candidates(lab, modules)
            if not gated(fn, lab) and answers_like_the_reference(lab, name, fn)]


@pytest.mark.parametrize("lab", LABS)
def test_no_course_function_answers_a_graded_function_ungated(lab):
    assert ungated_answers(lab, course_modules()) == []


OLD_KV_CACHE = '''
def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layer * n_kv_heads * head_dim * dtype_bytes
'''


def _module(name, source):
    m = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), m.__dict__)
    for v in vars(m).values():
        if isinstance(v, types.FunctionType):
            v.__module__ = name
    return m


def test_an_ungated_copy_of_an_answer_is_found():
    """kv_cache as it was (its own kv_bytes_per_token, no ANSWERS_FOR) is reported; the
    same module with the ANSWERS_FOR of lab05 is not; nor is a function of the same name
    that computes something else."""
    copy = _module("course.kv_cache_as_it_was", OLD_KV_CACHE)
    assert ungated_answers("lab05", {"kv_cache_as_it_was": copy}) == \
        ["kv_cache_as_it_was.kv_bytes_per_token (code in course.kv_cache_as_it_was)"]
    other = _module("course.kv_cache_as_it_was", OLD_KV_CACHE.replace("2 * n_layer", "n_layer"))
    assert ungated_answers("lab05", {"kv_cache_as_it_was": other}) == []
    assert gated(course.paged_kv.kv_bytes_per_token, "lab05") and not gated(copy.kv_bytes_per_token, "lab05")
    assert not gated(course.paged_kv.kv_bytes_per_token, "lab06")
