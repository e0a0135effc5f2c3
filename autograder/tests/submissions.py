"""Build submission notebooks for tests and benchmarks (no student needed).

    nb = from_variant("lab01", Path("autograder/variants/lab01/bug_x.py"))
    nb = with_solution_code("lab00", {"greedy_token": "def greedy_token(logits): ..."})
    write(nb, path)

`from_variant` maps a variant file onto the release notebook by function name: each
top-level def/class the variant has goes into the solution cell whose stub defines that
name; everything else (imports, helpers, constants) goes first, into the first solution
cell; a solution cell the variant has nothing for keeps its stub. The result is what a
student who wrote that code into the notebook would submit.
"""
from __future__ import annotations

import ast
import copy
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def release(lab: str, root: Path | None = None) -> nbformat.NotebookNode:
    folder = Path(root or ROOT) / "labs" / lab
    nbs = sorted(folder.glob("*.ipynb"))
    if not nbs:
        raise FileNotFoundError(f"no release notebook in labs/{lab}")
    named = [p for p in nbs if p.stem == lab]
    return nbformat.read(str((named or nbs)[0]), as_version=4)


def solution_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def _stub_names(cell) -> list[str]:
    try:
        tree = ast.parse(cell.source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def with_solution_code(lab: str, code_by_cell: dict[str, str], *, first: str | None = None,
                       root: Path | None = None) -> nbformat.NotebookNode:
    """The release notebook with the given solution cells (by grade_id) replaced; `first`,
    if given, replaces the first solution cell (whatever its id)."""
    nb = copy.deepcopy(release(lab, root))
    cells = solution_cells(nb)
    if first is not None:
        cells[0].source = first
    for cell in cells:
        gid = cell.metadata["nbgrader"]["grade_id"]
        if gid in code_by_cell:
            cell.source = code_by_cell[gid]
    return nb


def from_source(lab: str, source: str, *, root: Path | None = None) -> nbformat.NotebookNode:
    """Spread a Python module's code over the release's solution cells by function name."""
    nb = copy.deepcopy(release(lab, root))
    cells = solution_cells(nb)
    owner = {}
    for cell in cells:
        for name in _stub_names(cell):
            owner.setdefault(name, cell.metadata["nbgrader"]["grade_id"])
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    shared, per_cell = [], {}

    def text(node):
        start = node.lineno - 1
        if getattr(node, "decorator_list", None):
            start = min(d.lineno for d in node.decorator_list) - 1
        return "".join(lines[start:node.end_lineno])

    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) \
                and isinstance(node.value.value, str) and node is tree.body[0]:
            continue  # module docstring
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EXPECT_FAIL"
                                                for t in node.targets):
            continue
        name = getattr(node, "name", None)
        if name in owner:
            per_cell.setdefault(owner[name], []).append(text(node))
        else:
            shared.append(text(node))
    for i, cell in enumerate(cells):
        gid = cell.metadata["nbgrader"]["grade_id"]
        parts = (shared if i == 0 else []) + per_cell.get(gid, [])
        if gid in per_cell or (i == 0 and shared):
            if gid not in per_cell:      # keep the stub next to the shared code
                parts.append(cell.source)
            cell.source = "\n\n".join(p.rstrip("\n") for p in parts) + "\n"
    return nb


def from_variant(lab: str, path: Path, *, root: Path | None = None) -> nbformat.NotebookNode:
    return from_source(lab, Path(path).read_text(encoding="utf-8"), root=root)


def solution(lab: str, root: Path | None = None) -> Path:
    folder = Path(root or ROOT) / "solutions" / lab
    nbs = sorted(folder.glob("*.ipynb"))
    named = [p for p in nbs if p.stem == lab]
    return (named or nbs)[0]


def write(nb, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


# ---------------------------------------------------------------- the real nbgrader, for comparisons

def nbgrader_autograde(lab: str, submissions: dict, workdir: Path, *, timeout: float = 1800,
                       start_only: bool = False):
    """Autograde `submissions` ({student: notebook path}) with the real `nbgrader autograde`
    in a scratch course at `workdir`. Returns {student: {grade cell id: score}} (or, with
    start_only, a function that waits for the run and returns that)."""
    import shutil
    import subprocess
    import sys

    from autograder.release import nbgrader_env

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", workdir / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / lab, workdir / "solutions" / lab, dirs_exist_ok=True)
    name = solution(lab).name
    for student, path in submissions.items():
        dest = workdir / "course" / "nbgrader" / "submitted" / student / lab / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    cmd = (f"{sys.executable} -m nbgrader generate_assignment {lab} --force && "
           f"{sys.executable} -m nbgrader autograde {lab} --force")
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=workdir, env=nbgrader_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish():
        from nbgrader.api import Gradebook
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader failed for {lab}:\n{out[-4000:]}")
        scores = {}
        with Gradebook("sqlite:///" + str(workdir / "course" / "nbgrader" / "gradebook.db")) as gb:
            for student in submissions:
                sub = gb.find_submission(lab, student)
                scores[student] = {g.name: float(g.score) for nb in sub.notebooks for g in nb.grades}
        return scores

    return finish if start_only else finish()
