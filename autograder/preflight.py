"""Check a folder of submissions before `nbgrader autograde` (or the standalone grader) runs.

    python -m autograder preflight course/nbgrader/submitted --lab lab01 [--fix]

nbgrader and the isolated grader read a notebook differently when it is not the shape
the release gave out; one malformed notebook can even stop `nbgrader autograde` for every
student after it. For each notebook this reports, and with --fix repairs in place (the
original kept beside it as NAME.ipynb.orig, which neither grader reads):

  unreadable       not JSON, not a notebook object, no list of cells: reported, never fixed
  nbformat 3       converted to nbformat 4 (nbgrader converts on read, the isolated grader
                   refuses v3: converted, both read the same cells)
  wrong lab        its grade_ids are another lab's: reported, never fixed
  duplicate ids    two cells with one grade_id (nbgrader autograde aborts the run): the
                   first keeps it, later copies lose their nbgrader metadata
  metadata lost    cells of the release without their nbgrader metadata (a notebook copied
                   into a fresh file, an editor that drops metadata): restored from the
                   release by matching each cell's source (solution cells: by the names
                   their stub defines)
  missing cells    a solution or test cell of the release is nowhere: reported
  shadowing files  files next to the notebook named like a package the kernel imports
                   (autograder/, course/, torch.py...): under nbgrader the kernel would
                   import them instead; with --fix moved to FOLDER.quarantine/
  kernel tricks    code in the cells a student writes (solution cells, added cells) that
                   reaches into the kernel or the import system: input or AST
                   transformers, get_ipython(), IPython or autograder imports, sys.path,
                   sys.modules or import hooks, exec/eval, shell escapes and magics that
                   write files or run code, paths that name a shadowed package. Under
                   `nbgrader autograde` the notebook runs as you, and such code can rewrite
                   the hidden test cells before they run or swap the grader they import:
                   reported, never fixed (the isolated grader's score is unaffected)
  introspection    code in those cells that walks callers' frames or reaches into other
                   objects' state (sys._getframe, f_back, f_locals, tb_frame, gi_frame,
                   __closure__, inspect's frame functions, object.__setattr__ on another
                   object, __subclasses__, gc or ctypes imports): listed as REVIEW lines, to
                   read by hand; not a problem for the exit status, and no score changes
                   (the standalone grader's record and grades.csv carry the same list)

Exit status: 0 nothing left to report; 1 problems remain; 2 bad arguments.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHADOWED = ("autograder", "course", "torch", "numpy", "nbgrader", "IPython", "ipykernel", "ipywidgets",
            "matplotlib", "transformers", "logging", "os", "sys", "json", "math", "random", "builtins")
LAB_RE = re.compile(r"lab\d\d")


@dataclass
class Finding:
    path: Path
    student: str
    problems: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)     # to read by hand; not a problem (see introspection_in)

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------- the release

def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else (s if isinstance(s, str) else "")


def _nbg(cell) -> dict:
    m = cell.get("metadata") if isinstance(cell, dict) else None
    g = m.get("nbgrader") if isinstance(m, dict) else None
    return g if isinstance(g, dict) else {}


def release_cells(lab: str, root: Path | None = None) -> list[dict]:
    """The release notebook's cells of `lab` (plain dicts, nbformat 4)."""
    from .isolation import release_notebook_path
    path = release_notebook_path(lab, root)
    if path is None:
        raise ValueError(f"`lab` {lab!r} has no release notebook in labs/{lab}.")
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _graded_ids(cells) -> set[str]:
    """The grade_ids of solution and test cells (setup and text cells share names across labs)."""
    return {str(_nbg(c).get("grade_id")) for c in cells if _nbg(c).get("solution") or _nbg(c).get("grade")}


def _ids_by_lab(root: Path | None = None) -> dict[str, set[str]]:
    out = {}
    for folder in sorted((Path(root or ROOT) / "labs").glob("lab[0-9][0-9]")):
        try:
            out[folder.name] = _graded_ids(release_cells(folder.name, root))
        except (ValueError, OSError, KeyError, json.JSONDecodeError):
            continue
    return out


# ---------------------------------------------------------------- one notebook

def _load(path: Path, f: Finding):
    """The notebook as a dict (nbformat 4 after conversion), or None when unreadable."""
    import nbformat
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        f.problems.append(f"unreadable: {e.strerror}")
        return None, False
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        f.problems.append(f"unreadable: not valid notebook JSON ({str(e)[:120]})")
        return None, False
    if not isinstance(raw, dict):
        f.problems.append(f"unreadable: its JSON is a {type(raw).__name__}, not a notebook object")
        return None, False
    version = raw.get("nbformat")
    converted = False
    if version == 3:
        try:
            raw = json.loads(nbformat.writes(nbformat.convert(nbformat.from_dict(raw), 4)))
        except Exception as e:  # a v3 notebook nbformat cannot convert
            f.problems.append(f"unreadable: an nbformat 3 notebook that cannot be converted ({str(e)[:120]})")
            return None, False
        converted = True
    elif version != 4:
        f.problems.append(f"unreadable: nbformat {version!r} (expected 4)")
        return None, False
    if not isinstance(raw.get("cells"), list):
        f.problems.append("unreadable: no list of cells")
        return None, False
    return raw, converted


def _defined_names(source: str) -> tuple[str, ...]:
    from .isolation import defined_names
    return tuple(sorted(defined_names(source)))


def _restore_metadata(cells: list, release: list) -> list[str]:
    """Give cells that lost their nbgrader metadata the release's, matching by source
    (solution cells: by the names their stub defines). Returns the grade_ids restored."""
    present = {str(_nbg(c).get("grade_id")) for c in cells if _nbg(c)}
    by_source, by_names = {}, {}
    for rc in release:
        m = _nbg(rc)
        gid = str(m.get("grade_id", ""))
        if not m or gid in present:
            continue
        if m.get("solution") and rc.get("cell_type") == "code":
            names = _defined_names(_src(rc))
            if names:
                by_names.setdefault(names, (rc, gid))
        else:
            by_source.setdefault((rc.get("cell_type"), _src(rc).strip()), (rc, gid))
    restored = []
    for c in cells:
        if _nbg(c) or not isinstance(c, dict):
            continue
        hit = by_source.get((c.get("cell_type"), _src(c).strip()))
        if hit is None and c.get("cell_type") == "code":
            names = _defined_names(_src(c))
            hit = by_names.get(names) if names else None
        if hit is None or hit[1] in restored:
            continue
        rc, gid = hit
        c.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(_nbg(rc))
        restored.append(gid)
    return restored


def check_notebook(path: Path, lab: str, *, student: str = "", fix: bool = False,
                   root: Path | None = None, ids_by_lab: dict | None = None) -> Finding:
    """Preflight one submitted notebook (see the module docstring)."""
    path = Path(path)
    f = Finding(path, student or path.stem)
    nb, converted = _load(path, f)
    if nb is None:
        return f
    cells = nb["cells"]
    changed = False
    if converted:
        (f.fixed if fix else f.problems).append("nbformat 3" + (": converted to nbformat 4" if fix else
                                                                 " (nbgrader converts it, the isolated grader refuses it)"))
        changed = True
    ids_by_lab = ids_by_lab if ids_by_lab is not None else _ids_by_lab(root)
    release = release_cells(lab, root)
    mine = ids_by_lab.get(lab) or _graded_ids(release)
    ids = _graded_ids(cells)
    if ids and not ids & mine:
        other = max(((other, len(set(ids) & g)) for other, g in ids_by_lab.items() if other != lab),
                    key=lambda x: x[1], default=(None, 0))
        what = f"it is {other[0]}'s notebook" if other[1] else "none of its grade_ids belongs to this lab"
        f.problems.append(f"wrong lab: {what}, not {lab}'s")
        return f
    # duplicate grade_ids: the first keeps the id, later copies become plain cells
    seen, dups = set(), []
    for c in cells:
        gid = _nbg(c).get("grade_id")
        if gid is None:
            continue
        if gid in seen:
            dups.append(str(gid))
            if fix:
                del c["metadata"]["nbgrader"]
        seen.add(gid)
    if dups:
        msg = f"duplicate grade_ids {', '.join(sorted(set(dups)))} (nbgrader autograde stops on them)"
        (f.fixed if fix else f.problems).append(msg + ("; later copies lost their nbgrader metadata" if fix else ""))
        changed = changed or fix
    # metadata lost: restore from the release by source
    work = cells if fix else copy.deepcopy(cells)
    restored = _restore_metadata(work, release)
    if restored:
        msg = f"nbgrader metadata missing on {len(restored)} cell(s) ({', '.join(restored[:6])}" + \
              (", ..." if len(restored) > 6 else "") + ")"
        (f.fixed if fix else f.problems).append(msg + ("; restored from the release" if fix else ""))
        changed = changed or fix
    present = {str(_nbg(c).get("grade_id")) for c in work if _nbg(c)}
    needed = [str(_nbg(c)["grade_id"]) for c in release if _nbg(c).get("solution") or _nbg(c).get("grade")]
    missing = [g for g in needed if g not in present]
    if missing:
        f.problems.append(f"missing cells: {', '.join(missing)} (their tests score 0 on both paths)")
    # files that shadow packages the kernel imports
    folder = path.parent
    for entry in sorted(folder.iterdir()):
        stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
        if stem in SHADOWED and (entry.is_dir() or entry.name.endswith(".py")):
            if fix:
                dest = _quarantine(entry)
                f.fixed.append(f"{entry.name} would shadow the `{stem}` package in the kernel; moved to {dest}")
            else:
                f.problems.append(f"{entry.name} would shadow the `{stem}` package in the kernel (under nbgrader "
                                  "the notebook imports it instead of the real one)")
    for cell_name, what in introspection(cells, release):
        f.review.append(f"introspection in cell `{cell_name}`: {what} (code that can reach the grader's "
                        "objects in the student's process; both graders score it as usual)")
    for cell_name, what in kernel_tricks(cells, release):
        f.problems.append(f"kernel trick in cell `{cell_name}`: {what} (under nbgrader autograde it runs as you "
                          "and can change how the hidden tests run; trust the isolated grade)")
    if fix and changed:
        backup = path.with_name(path.name + ".orig")
        if not backup.exists():
            shutil.copy2(path, backup)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return f


# ---------------------------------------------------------------- kernel tricks (a static scan)

# the kernel's input and display machinery: what an input transformer or a hook is set through
SHELL_ATTRS = {"input_transformers_cleanup", "input_transformers_post", "input_transformer_manager",
               "ast_transformers", "cleanup_transforms", "line_transforms", "token_transformers",
               "ast_node_interactivity", "display_formatter", "displayhook", "excepthook", "CustomTB",
               "set_custom_exc", "register_magic_function", "register_magics", "run_cell", "transform_cell"}
IMPORT_ATTRS = {"path", "modules", "meta_path", "path_hooks", "path_importer_cache"}       # of sys
DYNAMIC = {"exec", "eval", "compile", "__import__"}
MAGICS = {"writefile", "file", "bash", "sh", "script", "python", "python2", "python3", "perl", "ruby", "run",
          "load", "load_ext", "reload_ext", "config", "capture", "system", "sx", "env", "alias", "macro",
          "store", "autoreload", "aimport"}
FOREIGN_IMPORTS = {"autograder", "IPython", "ipykernel", "importlib", "imp", "nbgrader", "jupyter_client",
                   "builtins", "ctypes", "runpy", "zipimport", "pkgutil", "site"}
_SHADOW_PATH = re.compile(r"(^|[/\\])(" + "|".join(map(re.escape, SHADOWED)) + r")([/\\]|\.py$|$)")


def _student_cells(cells: list, release: list):
    """(name, source) of the code cells nbgrader autograde runs as the student wrote them:
    solution cells and cells the student added (locked and test cells are replaced by the
    release's), less those still exactly as released."""
    released = {_src(c).strip() for c in release if c.get("cell_type") == "code"}
    for i, c in enumerate(cells):
        if not isinstance(c, dict) or c.get("cell_type") != "code":
            continue
        m = _nbg(c)
        if m and not m.get("solution") and (m.get("locked") or m.get("grade")):
            continue
        src = _src(c)
        if src.strip() and src.strip() not in released:
            yield str(m.get("grade_id") or f"#{i + 1}"), src


def _tricks_in(src: str) -> list[str]:
    import ast
    found = []
    if "get_ipython" in src:
        found.append("get_ipython() (the kernel's shell)")
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        python = TransformerManager().transform_cell(src)     # magics and ! lines become calls
    except Exception:  # IPython missing or a cell it cannot read: read it as Python
        python = src
    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found          # the graders report syntax errors; nbgrader runs nothing of it
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in SHELL_ATTRS:
                found.append(f"`{node.attr}` of the kernel")
            elif node.attr in IMPORT_ATTRS and isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"sys.{node.attr}")
            elif node.attr == "register" and isinstance(node.value, ast.Attribute) and node.value.attr == "events":
                found.append("a kernel event hook (events.register)")
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in DYNAMIC:
                found.append(f"{fn.id}() (code the scan cannot read)")
            elif isinstance(fn, ast.Attribute) and fn.attr in ("system", "getoutput"):
                found.append("a shell command (!)")
            elif isinstance(fn, ast.Attribute) and fn.attr in ("run_line_magic", "run_cell_magic") and node.args \
                    and isinstance(node.args[0], ast.Constant) and str(node.args[0].value) in MAGICS:
                found.append(f"the %{node.args[0].value} magic")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in FOREIGN_IMPORTS:
                    found.append(f"import {n}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 4096 \
                and _SHADOW_PATH.search(node.value.strip()) and ("/" in node.value or node.value.endswith(".py")):
            found.append(f"the path {node.value.strip()[:80]!r}, which names a package the kernel imports")
    return found


# ---------------------------------------------------------------- introspection (flagged for review)

# attributes that lead from a call to its callers' frames, or into a function's hidden state:
# how code running under the grader's probe can name the probe's objects (checks.Ledger)
FRAME_ATTRS = {"_getframe", "_current_frames", "f_back", "f_locals", "f_globals", "tb_frame", "gi_frame",
               "cr_frame", "ag_frame", "__closure__", "__globals__", "__subclasses__"}
INSPECT_FRAMES = {"currentframe", "stack", "getouterframes", "getinnerframes", "trace", "getframeinfo"}
TRACEBACK_FRAMES = {"walk_stack", "walk_tb"}
INTROSPECTION_IMPORTS = {"gc", "ctypes", "_ctypes"}


def introspection_in(src: str) -> list[str]:
    """What in `src` reaches past the student's own objects: callers' frames (sys._getframe,
    f_back, f_locals, f_globals, tb_frame, gi_frame, cr_frame, inspect's and traceback's
    frame walks), a function's closure cells and globals, sys.modules, object.__setattr__ on
    anything but `self`, __subclasses__, and imports of gc or ctypes. A static scan, for review: the
    grader measures through objects in the student's process (checks.Ledger), and such code
    can reach them. An empty list when there is none (or the cell does not parse)."""
    import ast
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        python = TransformerManager().transform_cell(src)
    except Exception:  # IPython missing or a cell it cannot read: read it as Python
        python = src
    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value.id if isinstance(node.value, ast.Name) else ""
            if node.attr in FRAME_ATTRS:
                found.append(f"{base + '.' if base == 'sys' else ''}{node.attr}")
            elif base == "sys" and node.attr == "modules":
                found.append("sys.modules")                   # any module's globals (the grader's too)
            elif base == "inspect" and node.attr in INSPECT_FRAMES:
                found.append(f"inspect.{node.attr}")
            elif base == "traceback" and node.attr in TRACEBACK_FRAMES | {"extract_stack"}:
                found.append(f"traceback.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FRAME_ATTRS:
            found.append(f"the name {node.value!r}")            # getattr(x, "f_back") and the like
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in ("__setattr__", "__delattr__") \
                    and isinstance(fn.value, ast.Name) and fn.value.id == "object" and node.args \
                    and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
                found.append(f"object.{fn.attr} on another object")
            elif isinstance(fn, ast.Attribute) and fn.attr in ("run_line_magic", "run_cell_magic") \
                    and len(node.args) >= 2 and isinstance(node.args[-1], ast.Constant) \
                    and isinstance(node.args[-1].value, str):
                found += introspection_in(node.args[-1].value)      # %time CODE, %%timeit ...: the code
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in INTROSPECTION_IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names = {a.name for a in node.names}
            if mod.split(".")[0] in INTROSPECTION_IMPORTS:
                found.append(f"import {mod}")
            elif (mod == "sys" and names & FRAME_ATTRS) or (mod == "inspect" and names & INSPECT_FRAMES) \
                    or (mod == "traceback" and names & (TRACEBACK_FRAMES | {"extract_stack"})):
                found += [f"{mod}.{n}" for n in sorted(names & (FRAME_ATTRS | INSPECT_FRAMES | TRACEBACK_FRAMES
                                                                   | {"extract_stack"}))]
    return list(dict.fromkeys(found))


def introspection(cells: list, release: list) -> list[tuple[str, str]]:
    """(cell, what) for each cell a student wrote that uses introspection_in's constructs."""
    out = []
    for name, src in _student_cells(cells, release):
        seen = introspection_in(src)
        if seen:
            out.append((name, ", ".join(seen[:6]) + (", ..." if len(seen) > 6 else "")))
    return out


def review_of(sub) -> list[str]:
    """Reasons to look at a graded submission by hand: "cell `ID`: what" for each cell of
    `sub` (a notebook.Submission) that the child ran as the student wrote it and that uses
    introspection (introspection_in). The score stands either way; the grader cannot tell a
    frame walk that read the grader's objects from one that did not."""
    out = []
    for c in getattr(sub, "cells", None) or []:
        if getattr(c, "trusted", False):
            continue
        seen = introspection_in(c.source)
        if seen:
            out.append(f"cell `{c.id}`: " + ", ".join(seen[:6]) + (", ..." if len(seen) > 6 else ""))
    return out


def kernel_tricks(cells: list, release: list) -> list[tuple[str, str]]:
    """(cell, what) for each cell a student wrote that reaches into the kernel or the import
    system (see the module docstring). A static scan: code it cannot read (exec of a built
    string) is itself reported, but what such code does is not."""
    out = []
    for name, src in _student_cells(cells, release):
        seen = list(dict.fromkeys(_tricks_in(src)))
        if seen:
            out.append((name, ", ".join(seen[:6]) + (", ..." if len(seen) > 6 else "")))
    return out


def _quarantine(entry: Path) -> Path:
    """Move a shadowing file out of the submission, keeping its place relative to the
    submission folder's parent: .../submitted/alice/lab01/torch.py -> .../submitted.quarantine/alice/lab01/."""
    parts = entry.resolve().parts
    base = entry.parent.parent.parent  # submitted/<student>/<lab>/entry -> submitted
    try:
        rel = entry.resolve().relative_to(base.resolve())
        dest = base.parent / (base.name + ".quarantine") / rel
    except ValueError:
        dest = entry.parent / ".quarantine" / parts[-1]
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(entry), str(dest))
    return dest


# ---------------------------------------------------------------- a folder

def submissions(folder: Path, lab: str) -> list[tuple[str, Path]]:
    """(student, notebook) pairs: nbgrader's submitted/<student>/<lab>/*.ipynb layout, or
    every notebook under `folder`."""
    folder = Path(folder)
    found = []
    nb_layout = sorted(folder.glob(f"*/{lab}/*.ipynb"))
    paths = nb_layout or sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for p in paths:
        student = p.parent.parent.name if nb_layout else (p.parent.name if p.parent != folder else p.stem)
        found.append((student, p))
    return found


def preflight(folder: Path, lab: str, *, fix: bool = False, root: Path | None = None) -> list[Finding]:
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"`folder` must be a folder of submissions, got {str(folder.resolve())!r}.")
    ids = _ids_by_lab(root)
    return [check_notebook(p, lab, student=s, fix=fix, root=root, ids_by_lab=ids) for s, p in submissions(folder, lab)]


def report(findings: list[Finding], lab: str) -> str:
    lines = []
    for f in findings:
        if f.problems or f.fixed or f.review:
            lines.append(f"{f.student}: {f.path}")
            lines += [f"  PROBLEM {p}" for p in f.problems] + [f"  FIXED   {x}" for x in f.fixed]
            lines += [f"  REVIEW  {r}" for r in f.review]
    bad = sum(1 for f in findings if f.problems)
    fixed = sum(1 for f in findings if f.fixed)
    review = sum(1 for f in findings if f.review)
    lines.append(f"{lab}: {len(findings)} notebook(s), {bad} with problems left, {fixed} fixed"
                 + (f", {review} to review by hand" if review else "")
                 + ("" if bad else " - ready for nbgrader autograde"))
    return "\n".join(lines)


def add_parser(sub) -> None:
    p = sub.add_parser("preflight", help="report (and --fix) malformed submissions before nbgrader autograde")
    p.add_argument("folder", help="nbgrader's submitted/ folder (student/lab/notebook) or a folder of notebooks")
    p.add_argument("--lab", required=True, help="labNN")
    p.add_argument("--fix", action="store_true",
                   help="convert v3, drop duplicate ids, restore metadata, quarantine shadowing files "
                        "(originals kept as .orig)")
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args) -> int:
    from .core import labs
    if args.lab not in labs():
        print(f"error: `--lab` must be one of {', '.join(labs())}, got {args.lab!r}.", file=sys.stderr)
        return 2
    try:
        findings = preflight(Path(args.folder), args.lab, fix=args.fix)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(findings, args.lab))
    return 1 if any(f.problems for f in findings) else 0
