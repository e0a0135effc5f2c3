"""Labs 05-07 ask for design, not transcription: an exercise's docstring states what must
hold (a contract, with the errors and an example where it helps), and the recipe, for a
learner who wants it, sits in the collapsed hints under the exercise (a nudge, a plan,
pseudocode). A numbered list of implementation steps in a docstring is the recipe again."""
import ast
import json
import re

import pytest

from notebooks import ROOT

STEP = re.compile(r"^\s*(?:\d+|\([a-z]\))[.)]?\s+\S", re.M)   # "1. ...", "2) ...", "(a) ..."


def docstrings(source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.name, doc


def graded_solution_cells(lab: str, edition: str = ""):
    path = ROOT / "labs" / edition / lab / f"{lab}.ipynb" if edition else ROOT / "solutions" / lab / f"{lab}.ipynb"
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("solution"):
            yield meta.get("grade_id") or cell.get("id"), "".join(cell["source"])


@pytest.mark.parametrize("edition", ["", "zh"])
@pytest.mark.parametrize("lab", ["lab05", "lab06", "lab07"])
def test_docstrings_state_contracts_not_numbered_steps(lab, edition):
    found = []
    for cell, source in graded_solution_cells(lab, edition):
        try:
            docs = list(docstrings(source))
        except SyntaxError:   # a release stub that is not valid Python on its own is another test's business
            continue
        for name, doc in docs:
            steps = STEP.findall(doc)
            if len(steps) >= 2:
                found.append(f"{cell}: {name} has {len(steps)} numbered steps")
    assert not found, "move the step list into the hints under the exercise:\n" + "\n".join(found)


# stricter, on the solutions: not one line may begin a step, "1." / "2)" / "(3)" / "Step 1"
# (after indentation or a bullet); a single numbered line is a recipe too
STEP_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:\(?\d{1,2}[.)](?:\s|$)|step\s+\d+\b)", re.IGNORECASE)


def numbered_steps(doc: str) -> list[str]:
    return [line.strip() for line in doc.splitlines() if STEP_LINE.match(line)]


@pytest.mark.parametrize("lab", ["lab05", "lab06", "lab07"])
def test_no_exercise_docstring_holds_a_numbered_step_line(lab):
    found = [(cell, name, doc) for cell, source in graded_solution_cells(lab) for name, doc in docstrings(source)]
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
def test_the_step_line_pattern(doc, steps):
    assert len(numbered_steps(doc)) == steps


HINTED = [("lab05", "pressure_md"), ("lab07", "exercise-schedule-md"), ("lab07", "exercise-run-batch-md"),
          ("lab07", "exercise-advance-md"), ("lab07", "exercise-finish-md"), ("lab07", "evidence-md")]
HINT = {"": r"<details><summary>Hint (\d): ", "zh": r"<details><summary>提示 (\d)："}


@pytest.mark.parametrize("edition", ["", "zh"])
@pytest.mark.parametrize("lab, cell_id", HINTED)
def test_the_steps_moved_into_collapsed_hints(lab, cell_id, edition):
    path = ROOT / "labs" / edition / lab / f"{lab}.ipynb" if edition else ROOT / "solutions" / lab / f"{lab}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "".join(next(c for c in nb["cells"] if c.get("id") == cell_id)["source"])
    hints = re.findall(HINT[edition], text)
    assert hints == ["1", "2", "3"], f"{lab} {cell_id}: hints {hints}, want a nudge, a plan and pseudocode"
    assert text.count("</details>") == 3
