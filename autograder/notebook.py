"""The one cell pipeline: read a notebook, select the cells a grader runs, stage them.

Both harnesses and the variant tests use it:

    sub = prepare(path, lab)        # standalone grader: cells run one by one in the sandboxed child
    code = extract(read(path)).code # in-process (variant tests): the same cells as one program

Selection (`select_cells`), in notebook order:
  * setup cells (nbgrader grade_id `imports*`/`setup*`): when the lab's release locks them,
    the release's version replaces the student's (as nbgrader's autograde does) and runs
    as trusted code;
  * solution cells (nbgrader `solution: true`), each on its own, so a syntax error or an
    exception in one does not remove the others' functions;
  * code cells the student added (no nbgrader metadata) contribute only their imports,
    defs, classes and literal constants (their experiments and plots do not run);
  * test cells, demo cells and markdown are left out. IPython magics and shell lines are
    turned into `pass`.
Nothing here runs the student's code.
"""
from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
MAX_NOTEBOOK = 32 * MiB         # a larger .ipynb is refused before parsing


class NotebookError(ValueError):
    """The notebook cannot be read or graded; the message says why."""


# ---------------------------------------------------------------- read

def read(path) -> nbformat.NotebookNode:
    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"`path` {str(path)!r} is not a file.")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotebookError(f"{path.name} is not valid notebook JSON ({e}).") from None
    if not isinstance(raw, dict):
        raise NotebookError(f"{path.name} is not an nbformat-4 notebook: its JSON is a {type(raw).__name__}, not an object.")
    if raw.get("nbformat") != 4:
        raise NotebookError(f"{path.name} is not an nbformat-4 notebook (nbformat={raw.get('nbformat')!r}).")
    try:
        return nbformat.from_dict(raw)
    except Exception as e:  # malformed cells
        raise NotebookError(f"{path.name} has malformed cells ({e}).") from None


def _meta(cell) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


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


def defined_names(source: str) -> list[str]:
    """Top-level function and class names a cell defines (empty if it does not parse)."""
    try:
        tree = ast.parse(strip_magics(source))
    except (SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def definitions_only(source: str) -> str:
    """Of a cell the student added: its imports, defs, classes and literal constants only."""
    tree = ast.parse(source)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            keep.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            try:
                ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            keep.append(node)
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


# ---------------------------------------------------------------- select

@dataclass
class Cell:
    id: str
    kind: str            # "setup" | "solution" | "extra"
    source: str
    trusted: bool = False


@dataclass
class Submission:
    path: str
    lab: str
    cells: list[Cell] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fatal: str | None = None        # the notebook cannot be graded at all
    sha256: str = ""


def release_notebook_path(lab: str, root: Path | None = None) -> Path | None:
    """The instructor's release notebook of `lab` (its locked cells are the trusted ones)."""
    folder = Path(root or ROOT) / "labs" / lab
    nbs = sorted(folder.glob("*.ipynb"))
    if not nbs:
        return None
    named = [p for p in nbs if p.stem == lab]
    return (named or nbs)[0]


@lru_cache(maxsize=16)
def release_cells(path: str):
    """(locked setup cells as (grade_id, source), solution grade_ids) of a release notebook."""
    nb = read(path)
    setup, solution_ids = [], []
    for cell in nb.cells:
        m = _meta(cell)
        if is_setup(cell) and m.get("locked"):
            setup.append((str(m.get("grade_id")), _source(cell)))
        elif is_solution(cell):
            solution_ids.append(str(m.get("grade_id")))
    return tuple(setup), tuple(solution_ids)


def select_cells(cells: list, release: Path | None = None) -> tuple[list[Cell], list[str]]:
    """The cells a grader runs, and problems worth telling the student (see the module doc)."""
    out: list[Cell] = []
    problems: list[str] = []
    trusted_ids: set[str] = set()
    release_solutions: tuple = ()
    if release is not None:
        setup, release_solutions = release_cells(str(release))
        for gid, src in setup:
            out.append(Cell(gid, "setup", strip_magics(src), trusted=True))
            trusted_ids.add(gid)
    seen = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        m = _meta(cell)
        gid = str(m.get("grade_id") or f"cell {i + 1}")
        src = _source(cell)
        if is_setup(cell):
            if gid not in trusted_ids:
                out.append(Cell(gid, "setup", strip_magics(src)))
        elif is_solution(cell):
            seen.append(gid)
            out.append(Cell(gid, "solution", strip_magics(src)))
        elif not m:
            try:
                kept = definitions_only(strip_magics(src))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                problems.append(f"an added cell ({gid}) does not parse; it was ignored.")
                continue
            if kept:
                out.append(Cell(f"added {gid}", "extra", kept))
    for g in release_solutions:
        if g not in seen:
            problems.append(f"the solution cell `{g}` is missing (deleted, or its metadata was changed); "
                            "the tests of the functions it defines score 0.")
    if not seen:
        problems.append("no solution cells were found: was this notebook made from the lab's release?")
    return out, problems


# ---------------------------------------------------------------- stage

def prepare(path, lab: str, *, root: Path | None = None) -> Submission:
    """Read a submitted notebook and list the cells the child will run. No student code runs here."""
    path = Path(path)
    sub = Submission(str(path), lab)
    try:
        raw = path.read_bytes() if path.is_file() else None
    except OSError as e:
        raw, sub.fatal = None, f"{path.name} cannot be read ({e.strerror})."
    if raw is None:
        sub.fatal = sub.fatal or f"{path.name} is not a file."
        return sub
    sub.sha256 = hashlib.sha256(raw).hexdigest()
    if len(raw) > MAX_NOTEBOOK:
        sub.fatal = f"{path.name} is {len(raw) / MiB:.0f} MiB; notebooks over {MAX_NOTEBOOK // MiB} MiB are not graded."
        return sub
    try:
        nb = read(path)
    except NotebookError as e:
        sub.fatal = str(e)
        return sub
    except RecursionError:
        sub.fatal = f"{path.name} is nested too deeply to be a notebook."
        return sub
    cells = nb.get("cells")
    if not isinstance(cells, list):
        sub.fatal = f"{path.name} has no list of cells."
        return sub
    sub.cells, sub.problems = select_cells(cells, release_notebook_path(lab, root))
    return sub


@dataclass
class Extracted:
    code: str
    solution_ids: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def extract(nb, release: Path | None = None) -> Extracted:
    """The cells `select_cells` chooses, as one program (for in-process use)."""
    cells, problems = select_cells(list(nb.get("cells", [])), release)
    parts = [f"# --- cell {c.id}\n{c.source}\n" for c in cells]
    return Extracted("\n".join(parts), [c.id for c in cells if c.kind == "solution"], problems)


def namespace(code: str, filename: str = "<submission>") -> dict:
    """Run `code` in a fresh namespace and return it (used in-process by tests;
    the standalone grader runs the cells inside the sandboxed child)."""
    ns: dict = {"__name__": "submission"}
    exec(compile(code, filename, "exec"), ns)
    return ns
