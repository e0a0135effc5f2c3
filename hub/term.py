"""An instructor's terminal on the hub: a language edition as its own assignment, and the
isolated grader's scores into the gradebook. Run in the course folder (LTFT_COURSE_DIR).

    python hub/term.py edition lab01 zh      # generates lab01-zh; then release it in formgrader
    python hub/term.py grade lab01 lab01-zh  # after collect and `nbgrader autograde`

`edition LAB LANG` writes the LANG edition of solutions/LAB (autograder.editions: the same
code, tests and grade ids, the text translated) to editions/LAB-LANG/ in the course folder
and runs `nbgrader generate_assignment LAB-LANG` on it, so nbgrader has a second assignment
whose notebook is LAB.ipynb. nbgrader releases an assignment to the whole course; students
who read LANG fetch LAB-LANG from their Assignments tab, the others LAB.

`grade ASSIGNMENT...` grades every collected submission of each assignment
(submitted/<student>/<assignment>/<lab>.ipynb) with `python -m autograder grade` into
grades/<assignment>/ (its grades.csv is the class CSV), then writes those scores into the
gradebook's assignment (`python -m autograder gradebook-sync --assignment`), so formgrader,
`nbgrader generate_feedback` and `nbgrader export` show the isolated grader's scores. An
edition is graded by the lab's own graders. Exit status: 0 done; 1 a submission was not
synced (the report says why); 2 bad arguments.
"""
from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = re.compile(r"(lab\d\d)(?:-([a-z]{2,3}))?")


def lab_of(assignment: str) -> tuple[str, str | None]:
    """('lab01', None) for lab01, ('lab01', 'zh') for lab01-zh."""
    m = ASSIGNMENT.fullmatch(assignment)
    if not m:
        raise ValueError(f"`assignment` must be labNN or labNN-LANG (e.g. lab01-zh), got {assignment!r}.")
    return m.group(1), m.group(2)


def nbgrader(course: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def edition(lab: str, lang: str, course: Path) -> Path:
    """Generate assignment LAB-LANG in `course`; returns its release folder."""
    sys.path.insert(0, str(REPO))
    import nbformat

    from autograder import editions
    if lang not in editions.LANGUAGES:
        raise ValueError(f"`lang` must be one of {', '.join(editions.LANGUAGES)}, got {lang!r}.")
    if not editions.translation_path(lab, lang).is_file():
        raise ValueError(f"{lab} has no {lang} edition (solutions/i18n/{lang}/{lab}.json does not exist).")
    assignment = f"{lab}-{lang}"
    sources = course / "editions"
    src = sources / assignment
    shutil.copytree(REPO / "solutions" / lab, src, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    nbformat.write(editions.edition(lab, lang), str(src / f"{lab}.ipynb"))
    nbgrader(course, "generate_assignment", assignment, "--force",
             f"--CourseDirectory.source_directory={sources}")
    return course / "release" / assignment


def db_url(course: Path) -> str:
    from traitlets.config.loader import PyFileConfigLoader
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    url = cfg.CourseDirectory.get("db_url")
    return str(url) if url else "sqlite:///" + str(course / "gradebook.db")


def grade(assignment: str, course: Path, workers: int | None = None):
    """Isolated grades of every collected submission of `assignment`, synced into the
    gradebook; returns gradebook_sync's report."""
    lab, _ = lab_of(assignment)
    notebooks = sorted((course / "submitted").glob(f"*/{assignment}/{lab}.ipynb"))
    if not notebooks:
        raise ValueError(f"no submission of {assignment} under {course / 'submitted'} (collect it first).")
    out = course / "grades" / assignment
    out.mkdir(parents=True, exist_ok=True)
    files = out / "files.csv"        # the student of each notebook, which the path alone does not say for editions
    with files.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["file", "student_id"])
        for nb in notebooks:
            w.writerow([str(nb), nb.parent.parent.name])
    cmd = [sys.executable, "-m", "autograder", "grade", *map(str, notebooks), "--lab", lab, "--roster", str(files),
           "--out", str(out), "--quiet"]
    if workers:
        cmd += ["--workers", str(workers)]
    proc = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True)
    print(proc.stdout, end="")
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"the isolated grader failed on {assignment}:\n{proc.stderr[-3000:]}")
    sys.path.insert(0, str(REPO))
    from autograder import gradebook_sync
    return gradebook_sync.sync(lab, out, db_url(course), assignment=assignment)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Language editions and isolated grading for the course on the hub.")
    ap.add_argument("--course", default=".", help="the course folder (default: the current folder)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("edition", help="generate LAB-LANG, the LANG edition of LAB, as its own assignment")
    p.add_argument("lab")
    p.add_argument("lang")
    p = sub.add_parser("grade", help="isolated grades of collected ASSIGNMENTs into the gradebook")
    p.add_argument("assignments", nargs="+")
    p.add_argument("--workers", type=int, default=None)
    ns = ap.parse_args(argv)
    course = Path(ns.course).resolve()
    if not (course / "nbgrader_config.py").is_file():
        print(f"error: {course} is not the course folder (no nbgrader_config.py); cd there or pass --course",
              file=sys.stderr)
        return 2
    try:
        if ns.cmd == "edition":
            lab_of(ns.lab)
            print(f"generated {edition(ns.lab, ns.lang, course)}: release it in formgrader "
                  f"or with `nbgrader release_assignment {ns.lab}-{ns.lang}`")
            return 0
        complete = True
        for assignment in ns.assignments:
            rep = grade(assignment, course, ns.workers)
            print(rep.text())
            complete &= rep.complete
        return 0 if complete else 1
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
