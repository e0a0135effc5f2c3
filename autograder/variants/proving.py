"""Grade one variant in this process (the in-kernel harness), and read its table.

    expect_fail(path)   the variant's EXPECT_FAIL, read without running the file
    grade(lab, path)    {grade_id: TestResult}, every hidden case judged in this process:
                        a variant that imports nothing of autograder.reference (a patch,
                        BASE = "solution", or a whole solution of its own) as the notebook a
                        student would submit (autograder.tests.submissions.from_variant, its
                        graded cells extracted and run); one that imports the reference as
                        the module itself, its autograder.reference imports real imports

The sandboxed standalone grader judges every variant's notebook in
autograder/tests/outcomes.py.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

VARIANTS = Path(__file__).resolve().parent
PREFIXES = ("bug_", "correct_")


def is_variant(path: Path) -> bool:
    path = Path(path)
    return (path.suffix == ".py" and path.name.startswith(PREFIXES)
            and path.parent.parent == VARIANTS and path.parent.name.startswith("lab"))


def is_patch(path: Path) -> bool:
    """Whether the variant is a patch on the solution notebook (`BASE = "solution"`)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BASE" for t in n.targets)
               for n in tree.body)


def imports_reference(path: Path) -> bool:
    """Whether the variant imports autograder.reference (in its notebook that becomes a pasted copy)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("autograder.reference"):
            return True
        if isinstance(n, ast.Import) and any(a.name.startswith("autograder.reference") for a in n.names):
            return True
    return False


def expect_fail(path: Path) -> dict[str, list[str]]:
    """EXPECT_FAIL of a variant file (a literal: a patch variant cannot run on its own)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EXPECT_FAIL"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{Path(path).name} has no EXPECT_FAIL table")


@lru_cache(maxsize=None)
def case_names(lab: str) -> dict[str, list[str]]:
    """{grade_id: [its hidden cases' names]} of a lab, in the grader's order."""
    from autograder import get_tests

    return {name: [c.name for c in test.cases] for name, test in get_tests(lab).items()}


def grade(lab: str, path: Path) -> dict:
    """{grade_id: TestResult} of the variant, graded in this process."""
    from autograder import get_tests, run_test
    from autograder.notebook import extract, namespace
    from autograder.tests.submissions import from_variant

    path = Path(path)
    if is_patch(path) or not imports_reference(path):   # what the student would submit
        ns = namespace(extract(from_variant(lab, path)).code, f"<variant {lab}/{path.stem}>")
    else:
        ns = namespace(path.read_text(encoding="utf-8"), str(path))
    return {name: run_test(test, ns) for name, test in get_tests(lab).items()}


def problems(path: Path, case_names: dict[str, list[str]]) -> list[str]:
    """What is wrong with a variant's table, given {grade_id: [case names]} of its lab."""
    path = Path(path)
    table = expect_fail(path)
    out = [f"EXPECT_FAIL names a test that does not exist: {name}" for name in table if name not in case_names]
    out += [f"EXPECT_FAIL names cases {name} does not have: {sorted(set(cases) - set(case_names[name]))}"
            for name, cases in table.items() if name in case_names and set(cases) - set(case_names[name])]
    if path.name.startswith("correct_") and table:
        out.append("a correct variant must expect no failures (EXPECT_FAIL = {})")
    if path.name.startswith("bug_") and not any(table.values()):
        out.append("a bug variant must name at least one case it fails")
    return out
