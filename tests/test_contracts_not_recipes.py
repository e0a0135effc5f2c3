"""An exercise's docstring states a contract, not a recipe: no docstring of an exercise of
labs 05-07 (a code cell of solutions/ with BEGIN SOLUTION) holds a numbered list of
implementation steps. The steps belong in the exercise's collapsed hints (Hint 2: the plan,
Hint 3: pseudocode) in its markdown cell."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LABS = ["lab05", "lab06", "lab07"]
# a line that begins a numbered step: "1." / "2)" / "(3)" / "Step 1" (after indentation or a bullet)
STEP = re.compile(r"^\s*(?:[-*]\s*)?(?:\(?\d{1,2}[.)](?:\s|$)|step\s+\d+\b)", re.IGNORECASE)


def exercise_docstrings(lab):
    """(cell id, name, docstring) of every function and class of each solution cell of `lab`."""
    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "BEGIN SOLUTION" not in source:
            continue
        cell_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {i}"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    yield cell_id, node.name, doc


def numbered_steps(doc):
    return [line.strip() for line in doc.splitlines() if STEP.match(line)]


@pytest.mark.parametrize("lab", LABS)
def test_no_exercise_docstring_holds_a_numbered_step_list(lab):
    found = list(exercise_docstrings(lab))
    assert found, f"no exercise docstring found in solutions/{lab}"
    recipes = {f"{cell} / {name}": steps for cell, name, doc in found if (steps := numbered_steps(doc))}
    assert not recipes, (f"{lab}: these docstrings hold numbered implementation steps; keep the contract there "
                         f"and move the steps into the exercise's collapsed hints: {recipes}")


@pytest.mark.parametrize("doc, steps", [
    ("Do it.\n\n1. take the blocks\n2. write them", 2),
    ("Do it:\n    Step 1: refuse\n    Step 2: queue", 2),
    ("Do it:\n  - 1) refuse\n  - 2) queue", 2),
    ("Returns 1.5 when 2 tokens fit.\nA budget of 0 fits 0 requests.", 0),
    ("Example: with block_size 4, 8 tokens fill 2 blocks.\n    10. is not a step? it is one", 1),
])
def test_the_step_pattern(doc, steps):
    assert len(numbered_steps(doc)) == steps
