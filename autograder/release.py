"""Regenerate the student release from solutions/ with nbgrader, in every language.

    python -m autograder.release lab00 lab01 ...      # labs/labNN (English) and labs/zh/labNN (Chinese)
    python -m autograder.release --lang en lab01      # one edition only

Runs the real `nbgrader generate_assignment` in a scratch copy of the course
(so the repository's gradebook is untouched), then copies the generated
notebooks into labs/ (English) and labs/<lang>/ (other languages). Each edition is a
complete nbgrader assignment with the same name and the same grade ids: its source is
solutions/labNN/labNN.ipynb with the translation solutions/i18n/<lang>/labNN.json
applied (autograder.editions), so code, tests and points are identical. A lab without
a translation file gets no edition in that language (and says so); a stale or missing
cell falls back to English here, and tests/test_i18n.py fails naming the cell.
`release_to(labs, folder, lang)` is what the sync tests compare with.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from . import editions

ROOT = Path(__file__).resolve().parent.parent


def nbgrader_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run_nbgrader(cwd, *args, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real `nbgrader ARGS...` in course root `cwd`; raise with its output if it fails."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


EDITIONS = ("en",) + editions.LANGUAGES


def release_dir(lab: str, lang: str = "en", root: Path | None = None) -> Path:
    """Where an edition is committed: labs/labNN (English) or labs/<lang>/labNN."""
    base = Path(root or ROOT) / "labs"
    return base / lab if lang == "en" else base / lang / lab


def release_to(labs: list[str], out: Path, lang: str = "en", *, strict: bool = False) -> Path:
    """Generate the `lang` edition of `labs` into out/labs/labNN (a scratch course root).
    Returns out/labs."""
    out = Path(out)
    if lang not in EDITIONS:
        raise ValueError(f"`lang` must be one of {', '.join(EDITIONS)}, got {lang!r}.")
    if not labs:
        raise ValueError("`labs` must name at least one lab, got an empty list.")
    (out / "solutions").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", out / "nbgrader_config.py")
    for lab in labs:
        src = ROOT / "solutions" / lab
        if not src.is_dir():
            raise ValueError(f"`lab` {lab!r} has no folder solutions/{lab}.")
        shutil.copytree(src, out / "solutions" / lab, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        if lang != "en":
            nb = editions.edition(lab, lang, strict=strict)
            nbformat.write(nb, str(out / "solutions" / lab / f"{lab}.ipynb"))
    # one nbgrader start for every lab (its start-up costs more than generating a notebook);
    # the scratch course holds only `labs`, so the pattern matches exactly those
    proc = run_nbgrader(out, "generate_assignment", labs[0] if len(labs) == 1 else "lab[0-9][0-9]", "--force")
    for lab in labs:
        if not (out / "labs" / lab).is_dir():
            raise RuntimeError(f"nbgrader generate_assignment {lab} wrote no labs/{lab}:\n{proc.stdout[-3000:]}")
    return out / "labs"


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m autograder.release",
                                     description="Write the student releases (labs/, labs/zh/) from solutions/.")
    parser.add_argument("labs", nargs="*", metavar="labNN", help="labs to release (default: every lab)")
    parser.add_argument("--lang", choices=list(EDITIONS), help="one edition only (default: every edition)")
    ns = parser.parse_args(list(argv) if argv is not None else None)
    known = sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]"))
    unknown = [lab for lab in ns.labs if lab not in known]
    if unknown:
        parser.error(f"`labNN` must be one of {', '.join(known)}, got {', '.join(map(repr, unknown))}.")
    labs = ns.labs or known
    langs = [ns.lang] if ns.lang else list(EDITIONS)
    for lang in langs:
        todo = labs if lang == "en" else [lab for lab in labs if editions.translation_path(lab, lang).is_file()]
        for lab in sorted(set(labs) - set(todo)):
            print(f"no {lang} edition of {lab}: solutions/i18n/{lang}/{lab}.json does not exist "
                  f"(see `python -m autograder.editions --help`)")
        if not todo:
            continue
        for lab in todo if lang != "en" else []:
            nb = nbformat.read(str(editions.source_path(lab)), as_version=4)
            for problem in editions.problems(nb, editions.load(lab, lang), lang):
                print(f"warning: {lab} {lang}: {problem}; English is used for that cell")
        with tempfile.TemporaryDirectory() as tmp:
            generated = release_to(todo, Path(tmp), lang)
            for lab in todo:
                dest = release_dir(lab, lang)
                if dest.exists():
                    shutil.rmtree(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(generated / lab, dest)
                print(f"released {lab} ({lang}) -> {dest.relative_to(ROOT)}")
    from . import memo       # the tiny model's expected values the visible judges read
    for lab in labs:
        if memo.memo_module(lab) is not None and not memo.is_current(lab):
            print(f"wrote {memo.write(lab).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
