"""What a lab asks of a learner, exercise by exercise, and the time that suggests.

    python -m autograder size --lab lab05
    python -m autograder size --lab lab05 --words-per-minute 80 --minutes-per-line 1.5

For each graded exercise (a solution cell of the release, in order):

- words to read: the words of the release's markdown cells from the end of the previous
  exercise up to this one, plus the exercise cell's own text (its docstring); what follows
  the last exercise (the summary, a stretch section) is reported as "the rest";
- lines to write: code lines of the solution's cell minus those of the release's cell
  (code lines: not blank, not a comment, not a docstring).

The estimate is a size model, not a measurement of anyone:

    minutes = words / words_per_minute + lines * minutes_per_line

with 100 words a minute (careful reading of technical text that is about to be turned into
code) and 1 minute a line (writing, running the checks and fixing, for a learner who has done
the course's earlier labs), and the lab's total rounded up to 15 minutes is what the syllabus
may quote. Both rates are assumptions, chosen once for every lab so that labs compare with
each other; a class's own timing (`python -m autograder times`) replaces the estimate.
"""
from __future__ import annotations

import ast
import io
import math
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .notebook import NotebookError, _meta, _source, is_solution, read
from .times import labs

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 100.0
MINUTES_PER_LINE = 1.0
ROUND_TO_MINUTES = 15


class SizeError(ValueError):
    """Bad input: the message names the parameter and the value it got."""


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring (a string
    that is the first statement of a module, class or function). Source that does not parse
    counts every non-blank, non-comment line."""
    lines = source.splitlines()
    skip: set[int] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    comments: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and not lines[tok.start[0] - 1][:tok.start[1]].strip():
                comments.add(tok.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        comments = {i for i, line in enumerate(lines, 1) if line.lstrip().startswith("#")}
    return sum(1 for i, line in enumerate(lines, 1)
               if line.strip() and i not in skip and i not in comments)


def _cells(path: Path) -> list:
    try:
        return read(path).cells
    except NotebookError as e:
        raise SizeError(f"cannot read the notebook {str(path)!r}: {e}") from None


def _solution_id(cell) -> str | None:
    return _meta(cell).get("grade_id") if is_solution(cell) else None


@dataclass
class Exercise:
    name: str
    words: int
    lines: int

    def minutes(self, words_per_minute: float = WORDS_PER_MINUTE, minutes_per_line: float = MINUTES_PER_LINE) -> float:
        return self.words / words_per_minute + self.lines * minutes_per_line


def measure(release: Path, solution: Path) -> tuple[list[Exercise], int]:
    """(the exercises in the release's order, words of the rest) of a release notebook and
    its solution notebook."""
    solved = {_solution_id(c): _source(c) for c in _cells(solution) if _solution_id(c)}
    out, words = [], 0
    for cell in _cells(release):
        gid = _solution_id(cell)
        if cell.get("cell_type") == "markdown":
            words += len(_source(cell).split())
        elif gid is not None:
            if gid not in solved:
                raise SizeError(f"the solution notebook {str(solution)!r} has no solution cell {gid!r}")
            given = _source(cell)
            out.append(Exercise(gid, words + len(given.split()), max(0, code_lines(solved[gid]) - code_lines(given))))
            words = 0
    if not out:
        raise SizeError(f"the release notebook {str(release)!r} has no solution cell (nbgrader metadata)")
    return out, words


def report(lab: str, exercises: list[Exercise], rest_words: int, words_per_minute: float = WORDS_PER_MINUTE,
           minutes_per_line: float = MINUTES_PER_LINE) -> tuple[str, int]:
    """A markdown table and the suggested syllabus minutes (the total rounded up to 15)."""
    rows = ["| exercise | words to read | lines to write | minutes |", "| --- | ---: | ---: | ---: |"]
    total = rest_words / words_per_minute
    for ex in exercises:
        m = ex.minutes(words_per_minute, minutes_per_line)
        total += m
        rows.append(f"| {ex.name} | {ex.words} | {ex.lines} | {m:.0f} |")
    rows.append(f"| the rest (after the last exercise) | {rest_words} | 0 | {rest_words / words_per_minute:.0f} |")
    words = sum(e.words for e in exercises) + rest_words
    lines = sum(e.lines for e in exercises)
    rows.append(f"| **{lab}** | {words} | {lines} | {total:.0f} |")
    suggested = int(math.ceil(total / ROUND_TO_MINUTES) * ROUND_TO_MINUTES)
    head = (f"{lab}: a size estimate at {words_per_minute:g} words a minute and {minutes_per_line:g} minute(s) a "
            f"line, not a measurement; suggested syllabus time {suggested} minutes.\n\n")
    return head + "\n".join(rows) + "\n", suggested


def add_parser(sub) -> None:
    p = sub.add_parser("size", help="words to read and lines to write per exercise, and the time they suggest")
    p.add_argument("--lab", required=True, help="labNN")
    p.add_argument("--words-per-minute", type=float, default=WORDS_PER_MINUTE)
    p.add_argument("--minutes-per-line", type=float, default=MINUTES_PER_LINE)
    p.set_defaults(func=main)


def main(args) -> int:
    for name in ("words_per_minute", "minutes_per_line"):
        if not getattr(args, name) > 0:
            print(f"error: `--{name.replace('_', '-')}` must be > 0, got {getattr(args, name):g}.", file=sys.stderr)
            return 2
    if args.lab not in labs():
        print(f"error: `--lab` must be one of {', '.join(labs())}, got {args.lab!r}.", file=sys.stderr)
        return 2
    release, solution = ROOT / "labs" / args.lab / f"{args.lab}.ipynb", ROOT / "solutions" / args.lab / f"{args.lab}.ipynb"
    try:
        exercises, rest = measure(release, solution)
    except SizeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(args.lab, exercises, rest, args.words_per_minute, args.minutes_per_line)[0], end="")
    return 0
