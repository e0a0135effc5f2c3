"""Lab 00 submissions for preflight and the gradebook tests (tests/test_preflight_sync.py,
e2e/test_preflight_gradebook.py): the reference solved in the release, the same notebook
broken in the ways preflight repairs, and a corpus of honest and forging students."""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "autograder" / "reference" / "lab00.py").read_text()
BUG_TIE = (ROOT / "autograder" / "variants" / "lab00" / "bug_tie_highest_id.py").read_text()


def release(lab="lab00"):
    return nbformat.read(str(ROOT / "labs" / lab / f"{lab}.ipynb"), as_version=4)


def solved(code=REFERENCE, lab="lab00"):
    nb = release(lab)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = code
            break
    return nb


def stripped(nb):
    nb = copy.deepcopy(nb)
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)
    return nb


def as_v3_text(nb) -> str:
    return nbformat.writes(nbformat.convert(nb, 3), version=3)


def put(folder, student, nb_or_text, lab="lab00"):
    path = folder / student / lab / f"{lab}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb_or_text if isinstance(nb_or_text, str) else nbformat.writes(nb_or_text))
    return path


def with_duplicate_test_cell(nb):
    nb = copy.deepcopy(nb)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    twin = copy.deepcopy(test)
    twin["id"] = "copied-test-cell"
    nb.cells.append(twin)
    return nb


HONEST = {
    "honest": REFERENCE,
    "logging_info": "import logging\nlogging.basicConfig(level=logging.INFO)\n" + REFERENCE.replace(
        "    best = logits.max()", "    logging.info('picking the greedy token')\n    best = logits.max()"),
    "os_write_fd2": "import os\n" + REFERENCE.replace(
        "    best = logits.max()", "    os.write(2, b'debug: picking\\n')\n    best = logits.max()"),
    "partial": BUG_TIE,
    "stub": "def greedy_token(logits):\n    raise NotImplementedError()\n",
}
# replaces the grader in the kernel: full marks under nbgrader, whatever the code does
FORGER = ("import autograder.kernel as _k\n_k.grade = lambda lab, name, ns: 5.0\n"
          "def greedy_token(logits):\n    raise NotImplementedError()\n")
