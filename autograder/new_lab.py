"""Scaffold a new lab: every file a lab needs, each a small working example to edit.

    python -m autograder.new_lab lab05 --title "KV memory"      (or: make new-lab LAB=lab05)

Writes (and refuses to overwrite any that exist):

    solutions/labNN/labNN.ipynb           nbgrader source: intro, locked imports, one solution
                                          cell (stub + BEGIN/END SOLUTION), one graded test cell
                                          (visible check + hidden grade), Summary, Exercises
    autograder/graders/labNN/             the graders as pytest tests: __init__.py (API, coverage table),
                                          probes.py (runs in the student's process), test_clip_logits.py
    autograder/reference/labNN.py         the judges' expected values
    autograder/variants/labNN/bug_*.py    one student mistake, with EXPECT_FAIL
    autograder/variants/labNN/correct_*.py  one differently written correct solution
    course/syllabus/labNN.md              objectives, graded functions, points, time
    course/glossary/labNN.md              | term | 中文 | meaning |
    datasets/generators/fixtures_labNN.py the fixture generator hook (FIXTURES = [])

The example exercise (`clip_logits`) passes its own grader, so the new lab is green from
the first commit; replace it exercise by exercise. Then run `make release` for the lab,
`make docs`, and add the lab to the README's table (the README's contributor section
lists every step).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB_NAME = re.compile(r"lab\d\d")

STUB = '''def clip_logits(logits, limit):
    """Clip every logit into [-limit, limit] and return a NEW tensor.

    logits: float tensor of shape (..., V); not modified.
    limit: a finite number > 0.
    Raises ValueError naming `limit` and showing its value otherwise.
    """
'''

# The nbgrader markers are assembled, so this file never holds them literally (release and
# bundle leak scans look for them in everything that ships).
BEGIN, END = "### BEGIN", "### END"
SOLUTION_BODY = (f"    {BEGIN} SOLUTION\n"
                 "    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) "
                 "or limit <= 0:\n"
                 "        raise ValueError(f\"`limit` must be a finite number > 0, got {limit!r}.\")\n"
                 "    return logits.clamp(-limit, limit)\n"
                 f"    {END} SOLUTION\n")


def _cell(kind, source, grade_id, *, grade=False, solution=False, locked=True, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    cell = {"cell_type": kind, "metadata": {"nbgrader": meta}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def notebook(lab: str, title: str) -> dict:
    number = lab[3:]
    test = (f'"""clip_logits: visible check on one fixture; hidden: a batch, masked tokens, bad limits."""\n'
            f'from autograder.kernel import check, grade\n'
            f'check("{lab}", "clip_logits_clips", globals())\n'
            f'{BEGIN} HIDDEN TESTS\n'
            f'grade("{lab}", "clip_logits_clips", globals())\n'
            f'{END} HIDDEN TESTS')
    cells = [
        _cell("markdown", f"# Lab {number} — {title}\n\nWhat this lab is about, in two or three sentences, "
                          "and what the learner will be able to do at the end.", "intro"),
        _cell("code", "import math\n\nimport torch\n\nimport course", "imports"),
        _cell("markdown", "## 1. Clipping logits\n\nExplain the idea before the exercise.", "clip_intro"),
        _cell("code", STUB + SOLUTION_BODY.rstrip("\n"), "clip_logits", solution=True, locked=False),
        _cell("code", test, "clip_logits_clips", grade=True, points=3),
        _cell("markdown", "## Summary\n\n- What the learner now knows, one line per idea.", "summary"),
        _cell("markdown", "## Exercises\n\n1. A question that goes one step further.", "exercises"),
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)",
                                                        "language": "python", "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


GRADER_INIT = '''"""Graders for LABNN.

    probes.py             what runs in the student's process: builds the inputs by name,
                          calls clip_logits, returns plain data; imports no reference
    test_clip_logits.py   the cell clip_logits_clips: pytest tests that judge what the probes
                          observed against autograder/reference/LABNN.py

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

clip_logits(logits, limit)
  | clause                                         | case(s)                            |
  | every entry clipped into [-limit, limit]       | clips_a_fixture_row, clips_a_batch |
  | -inf / +inf become -limit / +limit             | clips_a_batch                      |
  | a NEW tensor; the input is not modified        | every value case                   |
  | ValueError naming `limit` and showing it       | rejects_bad_limits                 |
"""
LAB = "LABNN"

API = {"clip_logits": "(logits, limit)"}
'''

GRADER_PROBES = '''"""LABNN's probes: they run in the student's process and return plain data. No reference here.

A probe is a public function whose first parameter is `ns` (the student's namespace); the
tests name it in @pytest.mark.probe("clip_logits", "peaked", 1.0) with plain arguments.
"""
from __future__ import annotations

import math

import torch

import course

from autograder.checks import record
from autograder.core import function


def _batch():
    rows = [course.fixtures.load("peaked").logits(0), course.fixtures.load("masked_logits").logits(0)]
    return torch.stack(rows).index_fill(1, torch.tensor([0]), math.inf)   # (2, V), +inf and -inf in it


INPUTS = {"peaked": ("fixture 'peaked'", lambda: course.fixtures.load("peaked").logits(0)),
          "batch": ("a (2, 8) batch with +-inf", _batch)}
BAD_LIMITS = [0, -2.0, math.nan, True]


def logits(name: str) -> torch.Tensor:
    """A fresh copy of the input `name`."""
    return INPUTS[name][1]()


def label(name: str) -> str:
    """How messages name that input."""
    return INPUTS[name][0]


def clip_logits(ns, name: str, limit) -> dict:
    """clip_logits(logits(name), limit=limit), recorded (checks.record)."""
    return record(function(ns, "clip_logits"), (logits(name),), {"limit": limit})


def bad_limits(ns) -> list:
    """clip_logits on the 'peaked' row with each of BAD_LIMITS, recorded."""
    fn = function(ns, "clip_logits")
    return [record(fn, (logits("peaked"),), {"limit": limit}) for limit in BAD_LIMITS]
'''

GRADER_TEST = '''"""clip_logits(logits, limit): the hidden cases of the cell clip_logits_clips."""
from __future__ import annotations

import pytest

from autograder.checks import as_tensor, close, rejects, result_of, unchanged
from autograder.reference import LABNN as ref

from .probes import BAD_LIMITS, label, logits

pytestmark = pytest.mark.cell("clip_logits_clips", points=1,
                              description="clip_logits clips into [-limit, limit] and returns a new tensor")


def case(name, input_name, limit, hint, *, visible=False):
    """One row of the table: the probe clip_logits on `input_name` with `limit`, named `name`."""
    return pytest.param(input_name, limit, hint, id=name,
                        marks=[pytest.mark.probe("clip_logits", input_name, limit),
                               pytest.mark.cell(visible=visible, hint=hint)])


@pytest.mark.parametrize("input_name, limit, hint", [
    case("clips_a_fixture_row", "peaked", 1.0, "torch.clamp(logits, -limit, limit) clips every entry.", visible=True),
    case("clips_a_batch", "batch", 1.5, "Clip every row; -inf becomes -limit and +inf becomes +limit."),
])
def test_clips(observation, input_name, limit, hint):
    """Every entry clipped into [-limit, limit], in a new tensor; the input unchanged."""
    call = f"clip_logits(<{label(input_name)}>, limit={limit!r})"
    got = as_tensor(result_of(observation, call, hint), call)
    close(got, ref.clip_logits(logits(input_name), limit=limit), what=call, hint=hint)
    unchanged(observation, call)


@pytest.mark.probe("bad_limits")
def test_rejects_bad_limits(observation):
    """A limit that is not a finite number > 0 raises ValueError naming `limit` and showing it."""
    for limit, rec in zip(BAD_LIMITS, observation):
        rejects(rec, f"clip_logits(<{label('peaked')}>, limit={limit!r})", "limit", limit)
'''


def grader(lab: str) -> dict[str, str]:
    """The lab's package of pytest graders: file name -> content."""
    return {name: text.replace("LABNN", lab) for name, text in
            (("__init__.py", GRADER_INIT), ("probes.py", GRADER_PROBES), ("test_clip_logits.py", GRADER_TEST))}


def reference(lab: str) -> str:
    return f'''"""Reference for {lab}: the judges' expected values (never imported by students)."""
from __future__ import annotations

import math

import torch


def clip_logits(logits: torch.Tensor, limit) -> torch.Tensor:
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
        raise ValueError(f"`limit` must be a finite number > 0, got {{limit!r}}.")
    return logits.clamp(-limit, limit)   # (..., V), a new tensor
'''


BUG = '''"""Clips in place (clamp_), so the caller's logits change too."""
import math

EXPECT_FAIL = {"clip_logits_clips": ["clips_a_fixture_row", "clips_a_batch"]}


def clip_logits(logits, limit):
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
        raise ValueError(f"`limit` must be a finite number > 0, got {limit!r}.")
    return logits.clamp_(-limit, limit)   # BUG: in place
'''

CORRECT = '''"""A correct solution written differently: torch.where instead of clamp."""
import math

import torch

EXPECT_FAIL = {}


def clip_logits(logits, limit):
    if type(limit) not in (int, float) or math.isnan(limit) or math.isinf(limit) or limit <= 0:
        raise ValueError(f"`limit` must be finite and > 0 (got {limit})")
    high = torch.where(logits > limit, torch.full_like(logits, limit), logits)
    return torch.where(high < -limit, torch.full_like(logits, -limit), high)
'''


def syllabus(lab: str, title: str) -> str:
    return (f"## Lab {lab[3:]} — {title}\n\n"
            "- **Objectives:** what the learner can do at the end, as verbs.\n"
            "- **Graded functions:** `clip_logits`.\n"
            "- **Points:** 3 in 1 graded test (clipping 3).\n"
            "- **Time:** about 30 minutes to solve alone; no workshop variant (self-paced).\n"
            "- **Run time:** measure it (the solution notebook top to bottom on 2 CPU cores).\n")


def glossary(lab: str) -> str:
    return ("| term | 中文 | meaning |\n| --- | --- | --- |\n"
            "| logit clipping | logit 截断 | limiting every logit to [-limit, limit] before softmax |\n")


FIXTURES = '''"""Fixtures of {lab} (collected by make_fixtures.py: FIXTURES, optionally EXTRA_FILES and
README_SECTION). Build each with fixture_lib; the output must be byte-for-byte reproducible."""
from __future__ import annotations

FIXTURES: list[dict] = []
'''


def files(lab: str, title: str) -> dict[str, str]:
    """Relative path -> content of every file the new lab needs."""
    return {
        f"solutions/{lab}/{lab}.ipynb": json.dumps(notebook(lab, title), indent=1, ensure_ascii=False) + "\n",
        **{f"autograder/graders/{lab}/{name}": text for name, text in grader(lab).items()},
        f"autograder/reference/{lab}.py": reference(lab),
        f"autograder/variants/{lab}/bug_clip_in_place.py": BUG,
        f"autograder/variants/{lab}/correct_where.py": CORRECT,
        f"course/syllabus/{lab}.md": syllabus(lab, title),
        f"course/glossary/{lab}.md": glossary(lab),
        f"datasets/generators/fixtures_{lab}.py": FIXTURES.format(lab=lab),
    }


def scaffold(lab: str, title: str, root: Path = ROOT) -> list[Path]:
    """Write the new lab's files under `root`; refuse if any exists. Returns the paths written."""
    if not isinstance(lab, str) or not LAB_NAME.fullmatch(lab):
        raise ValueError(f"`lab` must look like lab05 (lab + two digits), got {lab!r}.")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"`title` must be a non-empty string, got {title!r}.")
    planned = {Path(root) / rel: text for rel, text in files(lab, title.strip()).items()}
    existing = [str(p.relative_to(root)) for p in planned if p.exists()]
    if existing:
        raise FileExistsError(f"{lab} already has {', '.join(existing)}; nothing was written.")
    for path, text in planned.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(planned)


NEXT_STEPS = """Next:
  1. .venv/bin/python -m autograder.release {lab}      # writes labs/{lab}/ (the student release)
  2. make docs                                          # SYLLABUS.md and GLOSSARY.md
  3. .venv/bin/python -m pytest autograder/tests/test_variants.py tests/test_labs_consistent.py -k {lab}
  4. replace the clip_logits example exercise by exercise; add the lab to README.md's table
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Scaffold a new lab (every file it needs).")
    ap.add_argument("lab", help="lab name, e.g. lab05")
    ap.add_argument("--title", default="Title of the lab", help="the lab's title (notebook heading, syllabus)")
    args = ap.parse_args(argv)
    try:
        written = scaffold(args.lab, args.title)
    except (ValueError, FileExistsError) as e:
        print(f"new_lab: {e}", file=sys.stderr)
        return 2
    for p in written:
        print(f"wrote {p.relative_to(ROOT)}")
    print(NEXT_STEPS.format(lab=args.lab))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
