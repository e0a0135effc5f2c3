"""Read a lab notebook and pull out the code a grader needs.

What is extracted, in notebook order:
  * setup cells: nbgrader grade_id starting with `imports` or `setup`;
  * solution cells: nbgrader `solution: true` code cells.
Demo cells (plots, widgets, timing runs) and test cells are left out, so the
graded code runs fast and cannot depend on a demo's side effects. Extra cells a
student added are ignored; IPython magics and shell lines are dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat


class NotebookError(ValueError):
    """The notebook cannot be read or graded; the message says why."""


@dataclass
class Extracted:
    code: str
    solution_ids: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read(path) -> nbformat.NotebookNode:
    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"`path` {str(path)!r} is not a file.")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotebookError(f"{path.name} is not valid notebook JSON ({e}).") from None
    if not isinstance(raw, dict):
        raise NotebookError(f"{path.name} is not a notebook: its JSON is a {type(raw).__name__}, not an object.")
    if raw.get("nbformat") != 4:
        raise NotebookError(f"{path.name} is not an nbformat-4 notebook (nbformat={raw.get('nbformat')!r}).")
    try:
        return nbformat.from_dict(raw)
    except Exception as e:  # malformed cells
        raise NotebookError(f"{path.name} has malformed cells ({e}).") from None


def _meta(cell) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def is_setup(cell) -> bool:
    gid = str(_meta(cell).get("grade_id", ""))
    return cell.get("cell_type") == "code" and (gid.startswith("imports") or gid.startswith("setup"))


def is_solution(cell) -> bool:
    return cell.get("cell_type") == "code" and bool(_meta(cell).get("solution"))


def strip_magics(source: str) -> str:
    keep = []
    for line in source.splitlines():
        s = line.lstrip()
        keep.append(("pass  # " + s) if s.startswith(("%", "!")) else line)
    return "\n".join(keep)


def extract(nb) -> Extracted:
    """The setup and solution code of a notebook, as one program."""
    parts, ids = [], []
    for cell in nb.get("cells", []):
        if is_setup(cell) or is_solution(cell):
            src = cell.get("source", "")
            if isinstance(src, list):
                src = "".join(src)
            gid = str(_meta(cell).get("grade_id", "?"))
            parts.append(f"# --- cell {gid}\n{strip_magics(src)}\n")
            if is_solution(cell):
                ids.append(gid)
    return Extracted("\n".join(parts), ids)


def namespace(code: str, filename: str = "<submission>") -> dict:
    """Run `code` in a fresh namespace and return it (used in-process by tests;
    the standalone grader does this inside the child process)."""
    ns: dict = {"__name__": "submission"}
    exec(compile(code, filename, "exec"), ns)
    return ns
