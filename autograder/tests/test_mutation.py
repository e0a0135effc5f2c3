"""`make mutation`'s pieces that decide what counts: which mutants are scored, what a
test run's exit means to mutmut, and how survivors are triaged (no mutants are run here)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mutmut import Context, list_mutations

from autograder import mutation

ROOT = Path(mutation.__file__).resolve().parents[1]


def _mutants(module: str) -> list:
    source = (ROOT / mutation.module_file(module)).read_text(encoding="utf-8")
    return source, list(list_mutations(Context(source=source, filename=mutation.module_file(module))))


def test_only_scope_functions_of_a_course_module_are_scored():
    source, mids = _mutants("course.generation")
    scope = mutation.scope_lines("course.generation", source)
    outside = [mid for mid in mids if mid.line_number + 1 not in scope]
    inside = [mid for mid in mids if mid.line_number + 1 in scope]
    assert outside and inside, "TextStream's mutants are not lab03's to catch; generate's are"
    assert {mutation.skip_reason("course.generation", source, mid) for mid in outside} == {"out of scope"}
    assert mutation.skip_reason("course.generation", source, inside[0]) is None


def test_a_reference_without_scope_is_scored_whole():
    source, mids = _mutants("autograder.reference.lab00")
    assert mids and mutation.scope_lines("autograder.reference.lab00", source) is None
    assert [mutation.skip_reason("autograder.reference.lab00", source, mid) for mid in mids] == [None] * len(mids)


def test_every_target_is_a_file_and_every_scope_name_is_defined():
    for lab, modules in mutation.TARGETS.items():
        for module in modules:
            path = ROOT / mutation.module_file(module)
            assert path.is_file(), f"{lab}: {module} is not {path}"
            if module in mutation.SCOPE:
                lines = mutation.scope_lines(module, path.read_text(encoding="utf-8"))
                defined = {n.name for n in __import__("ast").parse(path.read_text(encoding="utf-8")).body
                           if hasattr(n, "name")}
                assert set(mutation.SCOPE[module]) <= defined and lines


def test_a_run_that_cannot_even_collect_counts_as_a_kill(tmp_path):
    # mutmut reads only exit code 1 as a failing test run; a mutant that breaks an import
    # ends pytest with 2, which the plugin turns into 1 (and names in the log)
    (tmp_path / "test_broken.py").write_text("raise RuntimeError('planted')\n", encoding="utf-8")
    log = tmp_path / "log.jsonl"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           mutation.LOG_ENV: str(log), mutation.MUTANT_ENV: "m:1:0"}
    done = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider",
                           "-p", "autograder.mutation", "--rootdir", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert '"mutant": "m:1:0", "exit": 2' in log.read_text(encoding="utf-8")
    assert "collecting test_broken.py" in log.read_text(encoding="utf-8")


def test_message_text_and_listed_equivalents_are_triaged_and_nothing_else():
    assert mutation.equivalence("autograder.reference.lab01",
                                ['-    raise ValueError(f"`x` must be > 0, got {x}.")',
                                 '+    raise ValueError(f"XX`x` must be > 0, got {x}.XX")']) is not None
    assert mutation.equivalence("autograder.reference.lab01",
                                ["-    best_t, best_p = None, -1.0", "+    best_t, best_p = None, -2.0"]) is not None
    assert mutation.equivalence("autograder.reference.lab01",
                                ["-    if p > best_p:", "+    if p >= best_p:"]) is None


def test_the_runner_is_the_labs_pytest_graders_on_the_reference():
    cmd = mutation.runner("lab01", "python")
    assert "python -m pytest autograder/graders/lab01 --reference -x" in cmd
    assert "--timeout" in cmd and "-p pytest_timeout" in cmd and "-p autograder.mutation" in cmd
    assert set(mutation.runnable()) <= set(mutation.TARGETS)
