"""A graded function whose code lives in the course or autograder packages earns nothing,
in both harnesses: the in-kernel grade() of nbgrader's hidden cells and the standalone
grader (autograder.core.function, which every probe uses to look the function up)."""
from __future__ import annotations

import functools
import types
from pathlib import Path

import nbformat
import pytest

import course
from autograder import kernel
from autograder.core import Fail, function, get_tests, library_origin, run_test
from autograder.notebook import extract, namespace, read
from course import kv_cache, runs
from course.generation import generate as course_generate

ROOT = Path(__file__).resolve().parents[2]
GENERATE_TESTS = ("generate_stops_and_lengths", "generate_abnormal_endings")
HINT = "Write `generate` yourself in the notebook; the course's own copy is what your function is compared with."


def _notebook(code: str) -> dict:
    ns = {"__name__": "__main__"}
    exec(compile(code, "<cell>", "exec"), ns)
    return ns


def _solution_cells(lab: str) -> dict[str, str]:
    nb = nbformat.read(str(ROOT / "solutions" / lab / f"{lab}.ipynb"), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def _generate_cell(lab: str = "lab03") -> str:
    return next(gid for gid, src in _solution_cells(lab).items() if "def generate(" in src)


# ---------------------------------------------------------------- where a callable's code lives

@pytest.mark.parametrize("make,origin", [
    (lambda: course_generate, "course.generation"),
    (lambda: functools.partial(course_generate, max_tokens=4), "course.generation"),
    (lambda: runs.RecordingExecutor().__call__, "course.runs"),
    (lambda: runs.RecordingExecutor(), "course.runs"),
    (lambda: course.ScriptedModel, "course.scripted"),
    (lambda: functools.lru_cache(maxsize=None)(runs.greedy_sampler), "course.runs"),
    (lambda: staticmethod(kv_cache.kv_bytes_per_token), "course.paged_kv"),
    (lambda: __import__("autograder.reference.lab02", fromlist=["x"]).filter_logits, "autograder.reference.lab02"),
], ids=["imported", "partial", "bound_method", "instance", "class", "lru_cache", "staticmethod", "reference"])
def test_library_callables_are_found_through_their_wrappers(make, origin):
    assert library_origin(make()) == origin


def test_a_copy_renamed_into_the_notebook_still_points_at_the_course():
    """types.FunctionType(course code, notebook globals) with a notebook __module__: the
    code object's file is still course/generation.py."""
    copy = types.FunctionType(course_generate.__code__, {"__name__": "__main__"}, "generate")
    copy.__module__ = "__main__"
    assert library_origin(copy) == "course.generation"


def test_code_loaded_from_memory_in_the_isolated_child_counts_as_the_library():
    ns = {"__name__": "__main__"}
    exec(compile("def probe(x):\n    return x\n", "<autograder.graders.lab03>", "exec"), ns)
    assert library_origin(ns["probe"]) == "autograder.graders.lab03"


def test_the_students_own_code_is_not_the_library():
    ns = _notebook("import course, torch\nfrom course.runs import greedy_sampler\n"
                   "def pick(logits):\n    return greedy_sampler(logits)\n"          # calls a course helper
                   "square = lambda x: x * x\n"
                   "class Sampler(course.ScriptedModel):\n"                          # subclasses a course class
                   "    def pick(self, logits):\n        return int(logits.argmax())\n"
                   "bound = Sampler('eos_at_step_3').pick\n"
                   "inherited = Sampler('eos_at_step_3').decode\n")
    for name in ("pick", "square", "Sampler", "bound"):
        assert library_origin(ns[name]) is None, name
    assert library_origin(ns["torch"].softmax) is None
    assert library_origin(ns["inherited"]) == "course.scripted"   # a method the course wrote


def test_a_library_module_loaded_or_dropped_after_a_lookup_is_seen(tmp_path):
    """The list of loaded library modules is remembered between lookups; loading one more
    (or dropping one) is seen at the next lookup, even when sys.modules keeps its size."""
    import sys

    path = tmp_path / "late.py"
    path.write_text("def helper(x):\n    return x\n")
    ns = {"__name__": "__main__"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    assert library_origin(ns["helper"]) is None
    late = types.ModuleType("autograder._late_library_module")
    late.__file__ = str(path)
    sys.modules[late.__name__] = late
    try:
        assert library_origin(ns["helper"]) == "autograder._late_library_module"
        filler = types.ModuleType("not_the_library_filler")
        sys.modules[filler.__name__] = filler
        del sys.modules[late.__name__]               # same size as before, another newest entry
        assert library_origin(ns["helper"]) is None
        sys.modules[late.__name__] = late
        del sys.modules[filler.__name__]
        assert library_origin(ns["helper"]) == "autograder._late_library_module"
    finally:
        sys.modules.pop(late.__name__, None)
        sys.modules.pop("not_the_library_filler", None)
    assert library_origin(ns["helper"]) is None


def test_variant_files_under_autograder_are_student_code():
    """autograder/variants/ holds student-like code: a function compiled from such a file
    (not a loaded autograder module) is not refused."""
    path = ROOT / "autograder" / "variants" / "lab03" / "correct_stepper_class.py"
    ns = namespace(path.read_text(encoding="utf-8"), str(path))
    assert library_origin(ns["generate"]) is None


def test_function_names_the_function_the_module_and_what_to_do():
    with pytest.raises(Fail) as e:
        function({"generate": course_generate}, "generate")
    assert "`generate`" in e.value.message and "course.generation" in e.value.message
    assert e.value.hint == HINT


# ---------------------------------------------------------------- nbgrader: the in-kernel grade()

@pytest.fixture(scope="module")
def lab03_solution_ns():
    return namespace(extract(read(ROOT / "solutions" / "lab03" / "lab03.ipynb")).code, "<lab03 solution>")


@pytest.mark.parametrize("test_name", GENERATE_TESTS)
def test_in_kernel_the_solution_scores_full_and_the_course_loop_nothing(lab03_solution_ns, test_name, capsys):
    full = get_tests("lab03")[test_name].points
    assert kernel.grade("lab03", test_name, dict(lab03_solution_ns)) == full
    cheat = dict(lab03_solution_ns)
    exec("from course.generation import generate", cheat)
    with pytest.raises(kernel.NoPoints):
        kernel.grade("lab03", test_name, cheat)
    assert "course.generation" in capsys.readouterr().out


def test_in_kernel_a_course_function_of_an_earlier_lab_scores_nothing():
    """course.kv_cache (Lab 04, visible while Lab 05 is graded) hands out Lab 05's
    kv_bytes_per_token (course.paged_kv's): taken as it is, it earns nothing; a function
    written in the notebook that calls it is the student's own (and is graded)."""
    test = get_tests("lab05")["kv_bytes_per_token_counts_kv_heads"]
    taken = run_test(test, {"__name__": "__main__", "kv_bytes_per_token": kv_cache.kv_bytes_per_token})
    refused = [c for c in taken.cases if "kv_bytes_for_config" not in c.message]   # the other function is absent
    assert taken.score == 0 and len(refused) >= 3 and all("course.paged_kv" in c.message for c in refused)
    own = _notebook("from course import kv_cache\n"
                    "def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):\n"
                    "    return kv_cache.kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes)\n")
    assert not any("not from your notebook" in c.message for c in run_test(test, own).cases)


# ---------------------------------------------------------------- standalone

@pytest.mark.slow
def test_standalone_the_course_loop_scores_nothing_and_the_solution_full(tmp_path):
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    from autograder.tests.submissions import with_solution_code, write
    cells = _solution_cells("lab03")
    solved = write(with_solution_code("lab03", cells), tmp_path / "solved" / "lab03.ipynb")
    cheat = write(with_solution_code("lab03", {**cells, _generate_cell(): "from course.generation import generate\n"}),
                  tmp_path / "cheat" / "lab03.ipynb")
    limits = Limits(timeout=300, test_timeout=60, case_timeout=20)
    with Runtime("lab03") as rt:
        good = grade_isolated(prepare(solved, "lab03"), rt, limits=limits)
        bad = grade_isolated(prepare(cheat, "lab03"), rt, limits=limits)
    assert good.score == good.max_score, good.problems
    scores = {t.name: t.score for t in bad.tests}
    assert all(scores[name] == 0 for name in GENERATE_TESTS), scores
    assert scores["params_are_validated"] == get_tests("lab03")["params_are_validated"].points


@pytest.mark.slow
def test_standalone_a_visible_course_function_is_refused(tmp_path):
    """course.kv_cache is visible while Lab 05 is graded, but its kv_bytes_per_token is
    course.paged_kv's, which is not: the import fails and the function earns nothing."""
    from autograder.isolation import Limits, Runtime, grade_isolated, prepare
    from autograder.tests.submissions import with_solution_code, write
    gid = next(gid for gid, src in _solution_cells("lab05").items() if "def kv_bytes_per_token(" in src)
    nb = write(with_solution_code("lab05", {gid: "from course.kv_cache import kv_bytes_per_token\n"}),
               tmp_path / "lab05.ipynb")
    with Runtime("lab05") as rt:
        g = grade_isolated(prepare(nb, "lab05"), rt, limits=Limits(timeout=300, test_timeout=60, case_timeout=20))
    formula = next(t for t in g.tests if t.name == "kv_bytes_per_token_counts_kv_heads")
    refused = [c for c in formula.cases if "kv_bytes_for_config" not in c.message]
    assert formula.score == 0 and refused and all("kv_bytes_per_token" in c.message for c in refused), \
        [c.message for c in formula.cases]
    assert any("paged_kv" in p for p in g.problems), g.problems
