"""Write the isolated grader's per-cell scores into nbgrader's gradebook.

    python -m autograder grade course/nbgrader/submitted --lab lab01 --out grades/lab01
    python -m autograder gradebook-sync --lab lab01 --grades grades/lab01

nbgrader's autograde scores a cell by what the student's own kernel printed, so the
kernel can fake it (see the README, "Which grade to trust"). This command replaces the
automatic score of every graded cell with the score the isolated grader gave the same
test (grade_id == test name), so formgrader, `nbgrader generate_feedback` and `nbgrader
export` show grades no kernel trick can raise. Run it after `nbgrader autograde` (which
rewrites the automatic scores) and before feedback and export; running it twice changes
nothing. A manual score an instructor gave in formgrader still takes precedence, as
nbgrader always does.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = "sqlite:///" + str(ROOT / "course" / "nbgrader" / "gradebook.db")


@dataclass
class SyncReport:
    lab: str
    updated: dict = field(default_factory=dict)      # student -> (nbgrader score before, isolated score)
    created: list = field(default_factory=list)      # students added to the gradebook
    skipped: dict = field(default_factory=dict)      # student -> why their record was not used
    ungraded: list = field(default_factory=list)     # in the gradebook, no isolated record
    unmatched: dict = field(default_factory=dict)    # student -> grade cells with no isolated test

    def text(self) -> str:
        lines = [f"{'student':24} {'nbgrader':>9} {'isolated':>9}"]
        for s, (before, after) in sorted(self.updated.items()):
            flag = "  <- nbgrader gave more" if before is not None and before > after + 1e-9 else ""
            lines.append(f"{s:24} {'-' if before is None else f'{before:g}':>9} {after:>9g}{flag}")
        for s, why in sorted(self.skipped.items()):
            lines.append(f"{s:24} not synced: {why}")
        for s in self.ungraded:
            lines.append(f"{s:24} not synced: no isolated grade (run `python -m autograder grade` on it)")
        for s, cells in sorted(self.unmatched.items()):
            lines.append(f"{s:24} cells with no isolated test: {', '.join(cells)}")
        lines.append(f"{self.lab}: {len(self.updated)} submission(s) now carry the isolated grader's scores"
                     + (f", {len(self.created)} added" if self.created else ""))
        return "\n".join(lines)

    @property
    def complete(self) -> bool:
        return not (self.skipped or self.ungraded or self.unmatched)


def read_records(grades: Path, lab: str) -> dict[str, dict]:
    """The isolated grader's per-student records of `lab` under GRADES/students/*.json."""
    folder = Path(grades) / "students"
    if not folder.is_dir():
        raise ValueError(f"`grades` must be the --out folder of `python -m autograder grade` "
                         f"(with students/*.json), got {str(Path(grades).resolve())!r}.")
    out = {}
    for p in sorted(folder.glob("*.json")):
        rec = json.loads(p.read_text(encoding="utf-8"))
        if rec.get("lab") == lab and rec.get("student"):
            out[str(rec["student"])] = rec
    return out


def sync(lab: str, grades: Path, db_url: str = DEFAULT_DB, *, create: bool = False,
         assignment: str | None = None) -> SyncReport:
    """Set each graded cell's automatic score to the isolated grader's score of that test.
    `assignment`: the gradebook's assignment id when it is not `lab` (a language edition
    released as its own assignment, such as lab01-zh)."""
    from nbgrader.api import Gradebook, MissingEntry
    records = read_records(grades, lab)
    lab = assignment or lab            # from here on: the gradebook's assignment id
    rep = SyncReport(lab)
    with Gradebook(db_url) as gb:
        try:
            gb.find_assignment(lab)
        except MissingEntry:
            raise ValueError(f"`lab` {lab!r} is not an assignment in the gradebook {db_url} "
                             "(run `nbgrader generate_assignment` or `nbgrader autograde` first).") from None
        for student, rec in sorted(records.items()):
            if rec.get("status") == "grader_error":
                rep.skipped[student] = "the isolated grader failed on it (regrade with --force)"
                continue
            scores = {t["name"]: float(t["score"]) for t in rec.get("tests", [])}
            try:
                sub = gb.find_submission(lab, student)
            except MissingEntry:
                if not create:
                    rep.skipped[student] = "no nbgrader submission (pass --create to add it)"
                    continue
                gb.update_or_create_student(student)
                sub = gb.add_submission(lab, student)
                rep.created.append(student)
            before = float(sub.score) if sub.notebooks else None
            missing = []
            for nb in sub.notebooks:
                for g in nb.grades:
                    if not g.max_score:
                        continue
                    if g.name not in scores:
                        missing.append(g.name)
                        continue
                    g.auto_score = min(scores[g.name], float(g.max_score))
                    g.needs_manual_grade = False
            gb.db.commit()
            if missing:
                rep.unmatched[student] = missing
            rep.updated[student] = (before, float(gb.find_submission(lab, student).score))
        for sub in gb.assignment_submissions(lab):
            if sub.student.id not in records:
                rep.ungraded.append(sub.student.id)
    return rep


def add_parser(sub) -> None:
    p = sub.add_parser("gradebook-sync", help="write the isolated grader's scores into nbgrader's gradebook")
    p.add_argument("--lab", required=True, help="labNN")
    p.add_argument("--grades", required=True, help="the --out folder of `python -m autograder grade`")
    p.add_argument("--db", default=DEFAULT_DB, help="nbgrader's gradebook URL (default: the course's)")
    p.add_argument("--create", action="store_true", help="add students the gradebook does not have yet")
    p.add_argument("--assignment", default=None, help="the gradebook's assignment id, when not LAB (e.g. lab01-zh)")
    p.set_defaults(func=cmd_gradebook_sync)


def cmd_gradebook_sync(args) -> int:
    try:
        rep = sync(args.lab, Path(args.grades), args.db, create=args.create, assignment=args.assignment)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(rep.text())
    return 0 if rep.complete else 1
