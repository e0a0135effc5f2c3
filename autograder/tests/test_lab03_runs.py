"""Lab 03's answers stay out of the student's process: the scaffolding the lab's setup cell
imports (course.runs) leads to no answer module, the lab03 probes build their runs without
course.acceptance, and the course results they read from datasets/fixtures/lab03_runs.json
are exactly what the course loop returns today."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import course
from autograder.graders import lab03 as grader
from autograder.isolation.sandbox import answer_modules
from autograder.reference import lab03 as ref
from course import runs
from course.acceptance import run_spec

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = {f"course.{name}" for name in answer_modules(ROOT)}


def _imported_modules(path: Path, package: str) -> set[str]:
    """Every module a file imports anywhere (top level, inside functions, relative imports
    resolved against `package`), and the string arguments of import_module / __import__."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"):
            found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def test_answer_modules_are_the_ones_lab03_must_not_reach():
    assert {"course.generation", "course.acceptance"} <= ANSWERS
    assert "course.runs" not in ANSWERS


@pytest.mark.parametrize("path,package", [(ROOT / "course" / "runs.py", "course"),
                                          (ROOT / "autograder" / "graders" / "lab03" / "probes.py",
                                           "autograder.graders.lab03"),
                                          (ROOT / "autograder" / "graders" / "lab03" / "_inputs.py",
                                           "autograder.graders.lab03")],
                         ids=["course.runs", "graders.lab03", "graders.lab03._inputs"])
def test_scaffolding_and_probes_import_no_answer_module_even_lazily(path, package):
    assert not _imported_modules(path, package) & ANSWERS


def test_importing_the_scaffolding_loads_no_answer_module():
    code = ("import sys, course.runs\n"
            "print(sorted(m for m in sys.modules if m.startswith('course.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert not set(eval(out.stdout)) & ANSWERS, out.stdout


def test_nothing_the_scaffolding_holds_comes_from_an_answer_module():
    """What `greedy_sampler.__globals__` hands out is course.runs' namespace: none of its
    values is an answer module or defined in one."""
    for name, value in vars(runs).items():
        module = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
        assert module not in ANSWERS, f"course.runs.{name} comes from {module}"


def test_the_answer_modules_re_export_the_same_scaffolding():
    from course import acceptance, generation
    for name in ("MAX_STOP_STRINGS", "GenerationResult", "greedy_sampler", "seeded_sampler"):
        assert getattr(generation, name) is getattr(runs, name)
    for name in ("ALLOWED_TOOLS", "TOOL_SCHEMAS", "InjectedModel", "RecordingExecutor", "INJECT_DEFAULTS"):
        assert getattr(acceptance, name) is getattr(runs, name)


def test_the_course_results_file_equals_the_course_loop_now():
    """lab03_runs.json can never go stale: each result is what course.acceptance.run_spec
    (the course loop) returns for that spec today, as a fresh object each time."""
    assert grader.COURSE_RUN_SPECS
    for spec in grader.COURSE_RUN_SPECS:
        got = grader.course_result(spec)
        assert got == run_spec(spec), grader.run_key(spec)
        got.tokens.append(-1)
        assert grader.course_result(spec) == run_spec(spec)


def test_a_spec_without_a_course_result_is_a_clear_grader_error():
    with pytest.raises(RuntimeError, match="COURSE_RUN_SPECS"):
        grader.course_result(grader.S("eos_at_step_3", max_tokens=7))


def _specs():
    S = grader.S
    tokens = course.load_fixture("json_tool_call_ok")
    return (list(grader.COURSE_RUN_SPECS) + list(grader.FAILURE_SPECS) + grader._fixture_specs() + [
        S("stop_string_3_tokens", {"cancel_at": 0}, **grader.STOP3),
        S("stop_string_3_tokens", {"seconds_per_call": 0.25, "cancel_at": 3}, deadline=0.75, **grader.STOP3),
        S("stop_string_3_tokens", {"nan_at": 0}, **grader.STOP3),
        S("eos_at_step_3", {"banned_token_ids": [0]}, max_tokens=8),
        S("sampled_coin_flips", seed=11, max_tokens=6),
        {**S("eos_at_step_3", max_tokens=3), "prompt_ids": [1, 1]},
        S("json_tool_call_ok", {"banned_token_ids": [tokens.token_id("Paris")], "banned_words": ["tool"]},
          max_tokens=32),
    ])


def test_the_probes_build_the_same_runs_as_course_acceptance():
    """`grader.build` (course.runs only) and course.acceptance.build_run (what the judges
    rerun) give the same run: same tokens, text, finish reason, stop reason, usage, error
    and number of model calls, on the same clock."""
    for spec in _specs():
        model, input_ids, kwargs = grader.build(spec)
        result = ref.generate(model, input_ids, **kwargs).to_dict()
        got = {k: result[k] for k in ref.FIELDS} | {"error": result["error"], "calls": model.calls}
        assert got == ref.expected_run(spec, grader.CLOCK_START), grader.run_key(spec)


def test_build_leaves_the_spec_as_it_was():
    spec = grader.S("stop_string_3_tokens", {"banned_words": ["x"]}, max_tokens=4, stop=["\nUser:"])
    before = repr(spec)
    _, _, kwargs = grader.build(spec)
    kwargs["stop"].append("changed")
    assert repr(spec) == before


PROBES_WITHOUT_ANSWERS = r'''
import importlib.abc, json, sys, types
BLOCKED = ("course.generation", "course.acceptance", "autograder.reference.lab03")

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in BLOCKED:
            raise ImportError(f"{name} is out of reach")
        return None

sys.meta_path.insert(0, Blocker())
sys.modules["autograder.reference.lab03"] = types.ModuleType("autograder.reference.lab03")  # the child's stub
import nbformat
from autograder.core import get_tests
from autograder.notebook import extract, namespace
ns = namespace(extract(nbformat.read(sys.argv[1], as_version=4)).code, "<lab03 solution>")
failed = []
for test in get_tests("lab03").values():
    for case in test.cases:
        try:
            case.probe(ns)
        except Exception as e:
            failed.append(f"{test.name}/{case.name}: {type(e).__name__}: {e}")
print(json.dumps({"failed": failed, "loaded": sorted(m for m in BLOCKED if m in sys.modules
                                                      and m != "autograder.reference.lab03")}))
'''


def test_every_lab03_probe_runs_without_the_answer_modules(tmp_path):
    """As in the isolated child: course.generation and course.acceptance cannot be imported
    and the reference is a stub. Every probe of lab03 still runs the solution to the end."""
    import json
    script = tmp_path / "probes.py"
    script.write_text(PROBES_WITHOUT_ANSWERS, encoding="utf-8")
    out = subprocess.run([sys.executable, str(script), str(ROOT / "solutions" / "lab03" / "lab03.ipynb")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"failed": [], "loaded": []}, report
