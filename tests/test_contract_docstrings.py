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
