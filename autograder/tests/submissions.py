"""Build submission notebooks for tests and benchmarks (no student needed).

    nb = from_variant("lab01", Path("autograder/variants/lab01/bug_x.py"))
    nb = with_solution_code("lab00", {"greedy_token": "def greedy_token(logits): ..."})
    write(nb, path)

`from_variant` maps a variant file onto the release notebook by function name: each
top-level def/class the variant has goes into the solution cell whose stub defines that
name; everything else (imports, helpers, constants) goes first, into the first solution
cell; a solution cell the variant has nothing for keeps its stub. The result is what a
student who wrote that code into the notebook would submit.

A variant that sets `BASE = "solution"` is a patch on the solution notebook instead: every
solution cell holds the solution's code, and each def/class of the variant is added after
the code of the cell that defines that name, so it replaces the solution's (a class may
subclass the solution's class of the same name to override one method). An assignment of
a solution name (`_solution_generate = generate`) goes into that name's cell before the
variant's code, so the variant may call the solution's version it replaces.
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


def _stub_names(cell, *, assigned: bool = False) -> list[str]:
    try:
        tree = ast.parse(cell.source)
    except SyntaxError:
        return []
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if assigned:                      # names a cell's top-level assignments bind, too
        names += [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    return names


def _base(tree) -> str | None:
    """The value of a module's top-level `BASE = "..."` (None without one)."""
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BASE" for t in n.targets):
            return ast.literal_eval(n.value)
    return None


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


REFERENCE = "autograder.reference"


def _public(lab: str) -> set[str]:
    import importlib
    mod = importlib.import_module(f"{REFERENCE}.{lab}")
    names = getattr(mod, "__all__", None)
    return set(names) if names else {n for n in vars(mod) if not n.startswith("_")}


class _InlineReference(ast.NodeTransformer):
    """Imports of autograder.reference.* become reads of a copy the notebook itself defines
    (a student cannot import the reference in the standalone grader; they could paste it)."""

    def __init__(self):
        self.labs: set[str] = set()
        self.provided: set[str] = set()

    def _ref(self, lab: str) -> ast.expr:
        self.labs.add(lab)
        return ast.Name(f"_ref_{lab}", ast.Load())

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if mod == REFERENCE:
            return [ast.Assign([ast.Name(a.asname or a.name, ast.Store())], self._ref(a.name)) for a in node.names]
        if mod.startswith(REFERENCE + "."):
            lab = mod.split(".")[2]
            out = []
            for a in node.names:
                if a.name == "*":
                    self.provided |= _public(lab)
                    out.append(ast.parse(f"globals().update({{_k: _v for _k, _v in vars(_ref_{lab}).items() "
                                         f"if _k in {sorted(_public(lab))!r}}})").body[0])
                    self._ref(lab)
                else:
                    self.provided.add(a.asname or a.name)
                    out.append(ast.Assign([ast.Name(a.asname or a.name, ast.Store())],
                                          ast.Attribute(self._ref(lab), a.name, ast.Load())))
            return out
        return node

    def visit_Import(self, node):
        keep, out = [], []
        for a in node.names:
            if a.name.startswith(REFERENCE + ".") and a.asname:
                out.append(ast.Assign([ast.Name(a.asname, ast.Store())], self._ref(a.name.split(".")[2])))
            else:
                keep.append(a)
        if keep:
            out.insert(0, ast.Import(keep))
        return out


def _paste_course_imports(src: str) -> str:
    """`from course import X as Y` of a course module becomes a pasted copy of its source (what
    a student may do; importing it is what the grader refuses while X holds a lab's answers)."""
    tree = ast.parse(src)
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "course" and node.level == 0:
            kept = []
            for a in node.names:
                path = ROOT / "course" / f"{a.name}.py"
                if path.is_file():
                    copy_name = f"_course_{a.name}_copy"   # dataclasses look their module up in sys.modules
                    out.append(ast.parse(
                        f"{a.asname or a.name} = __import__('types').ModuleType({copy_name!r})\n"
                        f"__import__('sys').modules[{copy_name!r}] = {a.asname or a.name}\n"
                        f"exec(compile({path.read_text(encoding='utf-8')!r}, {'<course.' + a.name + ' copy>'!r}, "
                        f"'exec'), {a.asname or a.name}.__dict__)").body)
                else:
                    kept.append(a)
            if kept:
                out.append([ast.ImportFrom("course", kept, 0)])
        else:
            out.append([node])
    return ast.unparse(ast.Module([n for group in out for n in group], []))


def _prelude(labs) -> str:
    lines = ["import types as _types"]
    for lab in sorted(labs):
        src = _paste_course_imports((ROOT / "autograder" / "reference" / f"{lab}.py").read_text(encoding="utf-8"))
        lines += [f"_ref_{lab} = _types.ModuleType({lab + '_reference_copy'!r})",
                  f"exec(compile({src!r}, {'<' + lab + ' reference copy>'!r}, 'exec'), _ref_{lab}.__dict__)"]
    return "\n".join(lines)


def from_source(lab: str, source: str, *, root: Path | None = None) -> nbformat.NotebookNode:
    """Spread a Python module's code over the release's solution cells by function name.

    Each top-level def/class goes into the solution cell whose stub defines that name;
    everything else (imports, helpers, constants) goes first, into the first solution cell.
    Imports of autograder.reference (variants reuse the reference for the functions they
    do not break) are replaced by a copy of the reference pasted into the first cell, and
    a solution cell whose functions all come from it holds `pass`; a cell the variant has
    nothing for keeps its stub."""
    tree = ast.parse(source)
    base = _base(tree)
    if base not in (None, "solution"):
        raise ValueError(f'`BASE` must be "solution" (or absent), got {base!r}.')
    nb = copy.deepcopy(release(lab, root))
    cells = solution_cells(nb)
    if base == "solution":
        solved = {c.metadata["nbgrader"]["grade_id"]: c.source
                  for c in solution_cells(nbformat.read(str(solution(lab, root)), as_version=4))}
        for cell in cells:
            cell.source = solved[cell.metadata["nbgrader"]["grade_id"]]
    owner, stubs = {}, {}
    for cell in cells:
        gid = cell.metadata["nbgrader"]["grade_id"]
        stubs[gid] = _stub_names(cell, assigned=base == "solution")
        for name in stubs[gid]:
            owner.setdefault(name, gid)
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # module docstring
    body = [n for n in body if not (isinstance(n, ast.Assign) and
                                    any(isinstance(t, ast.Name) and t.id in ("EXPECT_FAIL", "BASE")
                                        for t in n.targets))]
    inliner = _InlineReference()
    body = [inliner.visit(n) for n in body]
    flat = []
    for n in body:
        flat += n if isinstance(n, list) else [n]
    shared, per_cell = [], {}
    if inliner.labs:
        shared.append(_prelude(inliner.labs))
    for node in flat:
        ast.fix_missing_locations(node)
        text = ast.unparse(node)
        name = getattr(node, "name", None)
        if name in owner:
            per_cell.setdefault(owner[name], []).append(text)
        elif base == "solution" and isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                and node.value.id in owner:       # `_old = f`: the solution's f, before the patch replaces it
            per_cell.setdefault(owner[node.value.id], []).append(text)
        else:
            shared.append(text)
    for i, cell in enumerate(cells):
        gid = cell.metadata["nbgrader"]["grade_id"]
        if base == "solution":                # the solution's code, then what the variant replaces
            parts = (shared if i == 0 else []) + [cell.source] + per_cell.get(gid, [])
            cell.source = "\n\n".join(p.rstrip("\n") for p in parts) + "\n"
            continue
        parts = (shared if i == 0 else []) + per_cell.get(gid, [])
        if gid not in per_cell:
            provided = bool(stubs[gid]) and set(stubs[gid]) <= inliner.provided
            if not provided and not (i == 0 and shared):
                continue                      # nothing for this cell: the stub stays
            if not provided:
                parts.append(cell.source)     # keep the stub next to the shared code
            elif not parts:
                parts = ["pass"]
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

def nbgrader_autograde_many(plan: dict, workdir: Path, *, timeout: float = 1800, start_only: bool = False):
    """Autograde {lab: {student: notebook}} with the real nbgrader CLI in ONE scratch course
    at `workdir` (one generate_assignment and one autograde for all labs: nbgrader's start-up
    costs more than a small notebook). Returns {lab: {student: {grade cell id: score}}}, or
    with start_only a function that waits for the run and returns that."""
    import shutil
    import subprocess
    import sys

    from autograder.release import nbgrader_env

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", workdir / "nbgrader_config.py")
    for lab, submissions in plan.items():
        shutil.copytree(ROOT / "solutions" / lab, workdir / "solutions" / lab, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        name = solution(lab).name
        for student, path in submissions.items():
            dest = workdir / "course" / "nbgrader" / "submitted" / student / lab / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
    py = sys.executable
    cmd = (f"{py} -m nbgrader generate_assignment 'lab[0-9][0-9]' --force && "
           f"{py} -m nbgrader autograde 'lab[0-9][0-9]' --force")
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=workdir, env=nbgrader_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish():
        from nbgrader.api import Gradebook
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader failed for {sorted(plan)}:\n{out[-4000:]}")
        scores: dict = {}
        with Gradebook("sqlite:///" + str(workdir / "course" / "nbgrader" / "gradebook.db")) as gb:
            for lab, submissions in plan.items():
                for student in submissions:
                    sub = gb.find_submission(lab, student)
                    scores.setdefault(lab, {})[student] = {g.name: float(g.score) for nb in sub.notebooks
                                                           for g in nb.grades}
        return scores

    return finish if start_only else finish()


def nbgrader_autograde(lab: str, submissions: dict, workdir: Path, **kw):
    """nbgrader_autograde_many for one lab: {student: {grade cell id: score}}."""
    if kw.get("start_only"):
        wait = nbgrader_autograde_many({lab: submissions}, workdir, **kw)
        return lambda: wait()[lab]
    return nbgrader_autograde_many({lab: submissions}, workdir, **kw)[lab]


def without_demos(nb) -> nbformat.NotebookNode:
    """The notebook without its demo cells (locked code cells that are neither setup,
    solution nor graded): what grades it does not change, and nbgrader runs it faster."""
    from autograder.notebook import is_setup
    nb = copy.deepcopy(nb)
    keep = []
    for c in nb.cells:
        m = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and m and not (m.get("solution") or m.get("grade") or is_setup(c)):
            continue
        keep.append(c)
    nb.cells = keep
    return nb
