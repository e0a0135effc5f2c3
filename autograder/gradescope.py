"""Gradescope: build the autograder zip, and grade inside Gradescope's container.

    python -m autograder gradescope --lab lab01 --out gradescope/   # -> gradescope/lab01-gradescope.zip

The zip (extracted by Gradescope into /autograder/source) holds setup.sh, run_autograder,
requirements.txt and: the
autograder package (core, harness, ALL graders and references: the judges need them),
the course library, the fixtures (and the tiny model if present) and the lab's release
notebook (its locked setup cells are the trusted ones). It never holds solutions/,
autograder/variants/, autograder/tests/ or any notebook but the release.

In the container run_autograder calls `python -m autograder gradescope-run --lab LAB`:
it finds the notebook in $AUTOGRADER_ROOT/submission (default /autograder), grades it like
`grade` does (each child in the OS sandbox, which shows it none of /autograder: bubblewrap,
or in Gradescope's container, which refuses namespaces, the container tier of
isolation/container.py, whose tree setup.sh builds at image build time) and writes
$AUTOGRADER_ROOT/results/results.json. Without either it refuses unless
`--allow-weak-isolation` is given.
Set AUTOGRADER_PYTHON to use another interpreter than the one setup.sh installs (tests do).
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
import tomllib
import zipfile
from pathlib import Path

from . import kept, reports
from .isolation.sandbox import lab_modules  # noqa: F401  (also used by callers of gradescope.lab_modules)

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = Path(__file__).resolve().parent / "gradescope_files"
VENV = "/opt/l2ft-venv"
# what the grading side needs of pyproject's dependencies (no Jupyter server, no nbgrader)
DEV_ONLY = ("new_lab", "mutation", "release")   # course-development tools, not grading
NOT_NEEDED = ("jupyterlab", "notebook", "nbgrader", "ipykernel", "nbclient", "nbconvert")


def requirements(root: Path | None = None) -> list[str]:
    deps = tomllib.loads((Path(root or ROOT) / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    # pytest is a course dependency: the graders are pytest tests (autograder.plugin)
    return [d for d in deps if re.split(r"[<>=!~ \[]", d, maxsplit=1)[0].lower() not in NOT_NEEDED]


def bundle_files(lab: str, root: Path | None = None) -> dict[str, Path]:
    """arcname -> file (the zip's root becomes /autograder/source)."""
    root = Path(root or ROOT)
    files: dict[str, Path] = {}

    def add(p: Path):
        rel = p.relative_to(root).as_posix()
        if "__pycache__" in rel or ".ipynb_checkpoints" in rel or p.name.startswith("."):
            return
        files[rel] = p

    ag = root / "autograder"
    for p in sorted(ag.glob("*.py")) + sorted((ag / "isolation").glob("*.py")):
        if p.stem not in DEV_ONLY:
            add(p)
    for p in sorted((ag / "messages").glob("*")):   # the report text in each language (reports.py)
        if p.suffix in (".py", ".json"):
            add(p)
    wanted = lab_modules(lab, root)
    for sub in ("graders", "reference"):
        for p in sorted((ag / sub).glob("*.py")):
            if not re.fullmatch(r"lab\d\d", p.stem) or p.stem in wanted:
                add(p)
        for lab_dir in sorted(ag / sub / name for name in wanted if (ag / sub / name).is_dir()):
            for p in sorted(lab_dir.glob("*.py")):   # a lab's package of pytest graders
                add(p)
    for rel in ["autograder/graders/kept_files.json", *kept.files(root, lab)]:   # digests, kept values (kept.py)
        if (root / rel).is_file() and rel.startswith("autograder/"):
            add(root / rel)
    for p in sorted((root / "course").rglob("*")):
        if p.is_file() and "nbgrader" not in p.relative_to(root / "course").parts:
            add(p)
    for p in sorted((root / "datasets").rglob("*")):
        rel = p.relative_to(root / "datasets").parts
        if p.is_file() and rel[0] != "generators" and p.suffix != ".py":
            add(p)
    for p in sorted((root / "labs" / lab).glob("*.ipynb")):
        add(p)
    add(root / "pyproject.toml")
    return files


def _script(name: str, **subs) -> str:
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for k, v in subs.items():
        text = text.replace("{{" + k + "}}", v)
    return text


def build_bundle(lab: str, out: Path, *, root: Path | None = None, hidden_visibility: str = "after_published") -> Path:
    """Write out/LAB-gradescope.zip and return its path."""
    from .core import labs
    if lab not in labs():
        raise ValueError(f"`lab` must be one of {', '.join(labs())}, got {lab!r}.")
    root = Path(root or ROOT)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = bundle_files(lab, root)
    for arc in files:
        if arc.startswith(("solutions/", "autograder/variants/", "autograder/tests/")):
            raise RuntimeError(f"refusing to ship {arc}")
    zpath = out / f"{lab}-gradescope.zip"
    tmp = zpath.with_name(zpath.name + ".tmp")
    stamp = (2020, 1, 1, 0, 0, 0)

    def put(z, arc, data: bytes, mode=0o644):
        info = zipfile.ZipInfo(arc, date_time=stamp)
        info.external_attr = (stat.S_IFREG | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, data)

    with zipfile.ZipFile(tmp, "w") as z:
        put(z, "setup.sh", _script("setup.sh", VENV=VENV).encode(), 0o755)
        put(z, "run_autograder", _script("run_autograder", LAB=lab, VENV=VENV,
                                         VISIBILITY=hidden_visibility).encode(), 0o755)
        put(z, "requirements.txt", ("\n".join(requirements(root)) + "\n").encode())
        put(z, "lab.json", (json.dumps({"lab": lab, "grader_version": reports.grader_version(lab, root)},
                                              indent=1) + "\n").encode())
        for arc, p in sorted(files.items()):
            put(z, arc, p.read_bytes())
    os.replace(tmp, zpath)
    return zpath


# ---------------------------------------------------------------- inside the container

def find_submission(folder: Path, lab: str) -> Path | None:
    nbs = [p for p in sorted(Path(folder).rglob("*.ipynb"))
           if ".ipynb_checkpoints" not in p.parts and not p.name.startswith(".")]
    if not nbs:
        return None
    named = [p for p in nbs if p.stem == lab]
    return (named or nbs)[0]


def _results_error(message: str) -> dict:
    return {"score": 0.0, "output": message, "tests": [], "stdout_visibility": "hidden"}


def run_in_container(lab: str, root: Path, *, hidden_visibility: str = "after_published", limits=None,
                     sandbox: str = "auto", allow_weak: bool = False) -> int:
    """Grade the submission under root/submission into root/results/results.json. Without the
    OS sandbox (and without `allow_weak`) it grades nothing and says why (exit status 2)."""
    from .isolation import Runtime, Sandbox, WeakIsolation, grade_isolated, prepare
    t0 = time.monotonic()
    root = Path(root)
    source, results = root / "source", root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    box = Sandbox.detect(sandbox)
    try:
        box.require(allow_weak)
    except WeakIsolation as e:
        res = _results_error("The autograder could not isolate submissions on this machine, so it did not "
                             "grade yours; the instructor has to fix the autograder setup. (" + str(e) + ")")
        reports.write_atomic(results, json.dumps(res, indent=1) + "\n")
        print(res["output"], file=sys.stderr)
        return 2
    nb = find_submission(root / "submission", lab)
    if nb is None:
        res = _results_error(f"No .ipynb file was found in your submission. Upload the {lab} notebook "
                             f"({lab}.ipynb) saved from Jupyter.")
        reports.write_atomic(results, json.dumps(res, indent=1) + "\n")
        print(res["output"])
        return 0
    sub = prepare(nb, lab, root=source if (source / "labs").is_dir() else None)
    hide = [str(p) for p in (source, root / "results", root / "submission") if p.is_dir()]
    with Runtime(lab, sandbox=box, hide=tuple(hide)) as rt:
        graded = grade_isolated(sub, rt, limits=limits)
    rec = reports.record(nb.stem, sub, graded, version=reports.grader_version(lab), limits=limits)
    res = reports.gradescope_results(rec, hidden_visibility=hidden_visibility)
    res["execution_time"] = round(time.monotonic() - t0, 2)
    reports.write_atomic(results, json.dumps(res, indent=1) + "\n")
    print(f"{lab}: {rec['score']:g}/{rec['max_score']:g} ({rec['status']}) for {nb.name} "
          f"in {res['execution_time']:.1f} s; sandbox {rec['sandbox']}", file=sys.stdout)
    for p in rec["problems"]:
        print("  problem:", p)
    return 0
