"""Adversarial submissions for lab00: each file is what a student puts in the
`greedy_token` solution cell. EXPECT says what the standalone grader must do:

    max_score   the most points the submission may get
    output_has  strings that must appear in what the child printed (proof the attack ran)
    output_not  strings that must never appear there (proof each attempt failed)
    problem     a substring one of the report's problems/messages must contain
    needs_os    True when only the OS-level sandbox (root: separate uid, mount namespace)
                stops this attack; the test skips it without one (a documented residual risk)

`build(dest)` writes one notebook per file, made from lab00's release notebook with the
solution cell replaced (autograder.tests.submissions.with_solution_code).
"""
from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sources() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HERE.glob("*.py")) if p.stem != "__init__"}


def expectations(path: Path) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path.name} has no EXPECT")


def build(dest: Path) -> dict[str, Path]:
    from ..submissions import with_solution_code, write
    out = {}
    for name, path in sources().items():
        nb = with_solution_code("lab00", {}, first=path.read_text(encoding="utf-8"))
        out[name] = write(nb, Path(dest) / f"{name}.ipynb")
    return out
