"""Minutes per exercise, from the cell timing JupyterLab writes into a class's notebooks.

    python -m autograder times --lab lab07 --notebooks submitted
    python -m autograder times --lab lab07 --notebooks DIR --out FOLDER --pause-minutes 30

Where the timing comes from: with the hub's opt-in switch on (hub/README.md, "Timing
the exercises"), JupyterLab's setting `recordTiming` writes into each code cell it runs
`metadata.execution`: the ISO times at which the kernel received the cell
("iopub.execute_input") and answered ("shell.execute_reply"). Nothing else is recorded.
Each run overwrites the last, so a notebook holds the time of the LATEST run of each
cell only. The estimator is built on that.

The estimator, for one student's notebook:

1. The exercises are the lab's nbgrader solution cells, in the order of the release
   (labs/labNN/labNN.ipynb), found in the student's notebook by their grade_id. An
   exercise's section is its solution cell and the code cells after it, up to the next
   exercise's solution cell (the last section runs to the end of the notebook). The
   code cells before the first exercise are the setup.
2. The finish of a section is the latest "shell.execute_reply" among its cells: when the
   student last ran that exercise's code or its checks.
3. The finishes (the setup's and each exercise's) are put in TIME order. An exercise's
   time is the time from the finish just before it to its own finish, minus every pause:
   a gap between two recorded cell runs longer than the cut-off (30 minutes unless
   --pause-minutes says otherwise) is not counted.
4. An exercise has no data for that student when none of its cells has timing, when no
   finish comes before it (the setup was re-run after it), when the whole interval was a
   pause (nothing is left once pauses are taken out), or when its interval holds no gap
   longer than a few seconds (--sweep-seconds, 10): its cells were re-run back to back by
   Run All or a restart, not worked on, and its own finish is lost.
5. A student's lab total is the sum of their exercises' minutes, for students with data on
   every exercise. A notebook without any timing is left out and counted; so is one in
   which every exercise was swept (the student ran everything at the end: no signal), and
   one in which no exercise was measured for another reason.

Reported per exercise: the number of students with data, the median, P75 and P90 minutes
(linear interpolation between the sorted values, as numpy's default); the same for the
total; and a suggestion, only a suggestion: syllabus time = P75 of the total, rounded up to
15 minutes.

Known biases:
- Reading before an exercise is counted in it only when the student finished the previous
  one before reading; reading or work before the first recorded run is missed.
- Only the latest run of each cell survives: a student who re-runs earlier cells after a
  restart erases when those exercises were done (swept, left out), and the exercise after
  the sweep is measured from the sweep's end.
- A pause is cut out only where it falls between two recorded runs; work done across a
  long gap (thinking 40 minutes without running anything) is cut out with it, so times
  lean low. A student who pauses under the cut-off is counted as working.
- Exercises done out of notebook order are measured in the order they were finished; a
  late re-run of an early exercise's check moves its finish, giving it the time of the work
  that came before the re-run and taking that time from the exercise it belonged to.
- The last exercise's section runs to the end of the notebook: cells run there later (the
  Summary's or a stretch section's) count in the last exercise.
- Students who opt out (the setting can be turned off in their own Settings) or run
  everything at the end are not a random sample of the class.
"""
from __future__ import annotations

import csv
import io
import json
import math
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .notebook import _meta, is_solution, read

ROOT = Path(__file__).resolve().parents[1]
PAUSE_MINUTES = 30.0
SWEEP_SECONDS = 10.0
ROUND_TO_MINUTES = 15

START_KEYS = ("iopub.execute_input", "shell.execute_reply.started", "iopub.status.busy")
END_KEYS = ("shell.execute_reply", "iopub.status.idle")


class TimesError(ValueError):
    """Bad input: the message names the parameter and the value it got."""


def labs() -> list[str]:
    return sorted(p.name for p in (ROOT / "labs").glob("lab[0-9][0-9]") if (p / f"{p.name}.ipynb").is_file())


def exercises(lab: str) -> list[str]:
    """The grade_ids of the lab's solution cells, in the release's order."""
    if lab not in labs():
        raise TimesError(f"`--lab` must be one of {', '.join(labs())}, got {lab!r}.")
    return [_meta(c)["grade_id"] for c in read(ROOT / "labs" / lab / f"{lab}.ipynb").cells if is_solution(c)]


def _time(value) -> float | None:
    """Seconds since the epoch of an ISO timestamp, None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:   # the kernel's and JupyterLab's times carry a zone; a bare one is read as UTC
        from datetime import timezone
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def cell_run(cell) -> tuple[float, float] | None:
    """(start, end) of the cell's latest recorded run, in seconds; None without timing."""
    ex = cell.get("metadata", {}).get("execution")
    if cell.get("cell_type") != "code" or not isinstance(ex, dict):
        return None
    start = next((t for t in map(_time, (ex.get(k) for k in START_KEYS)) if t is not None), None)
    end = next((t for t in map(_time, (ex.get(k) for k in END_KEYS)) if t is not None), None)
    if start is None and end is None:
        return None
    start = end if start is None else start
    end = start if end is None or end < start else end
    return start, end


@dataclass
class Student:
    """One notebook's estimate: minutes per exercise (None: no data, and why)."""
    student: str
    minutes: dict[str, float | None] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    status: str = "ok"                      # ok, no timing, swept, no exercise measured

    @property
    def total(self) -> float | None:
        values = list(self.minutes.values())
        return sum(values) if values and all(v is not None for v in values) else None


def _gaps(runs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The idle gaps between the recorded runs (overlapping runs merged)."""
    gaps, busy_until = [], None
    for s, e in sorted(runs):
        if busy_until is not None and s > busy_until:
            gaps.append((busy_until, s))
        busy_until = e if busy_until is None else max(busy_until, e)
    return gaps


def estimate(nb: dict, ids: list[str], student: str = "", pause_minutes: float = PAUSE_MINUTES,
             sweep_seconds: float = SWEEP_SECONDS) -> Student:
    """The estimator of the module docstring on one notebook (nbformat 4 as a dict)."""
    out = Student(student, {i: None for i in ids})
    cells = nb.get("cells", [])
    where = {}
    for k, c in enumerate(cells):
        meta = c.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in out.minutes and meta["grade_id"] not in where:
            where[meta["grade_id"]] = k
    runs = [r for r in map(cell_run, cells) if r is not None]
    if not runs:
        out.status = "no timing"
        out.why = {i: "no timing" for i in ids}
        return out
    bounds = sorted(where.values())
    finishes: list[tuple[float, str | None]] = []    # (finish, exercise id; None for the setup)
    setup = [r for r in map(cell_run, cells[:bounds[0] if bounds else len(cells)]) if r]
    if setup:
        finishes.append((max(e for _, e in setup), None))
    for gid, k in where.items():
        nxt = min((b for b in bounds if b > k), default=len(cells))
        done = [r for r in map(cell_run, cells[k:nxt]) if r]
        if done:
            finishes.append((max(e for _, e in done), gid))
        else:
            out.why[gid] = "not run"
    for gid in ids:
        if gid not in where:
            out.why[gid] = "not in notebook"
    finishes.sort(key=lambda f: f[0])
    gaps = _gaps(runs)
    pause, swept = pause_minutes * 60, 0
    for n, (b, gid) in enumerate(finishes):
        if gid is None:
            continue
        if n == 0:
            out.why[gid] = "no finish before it"
            continue
        a = finishes[n - 1][0]
        inside = [min(e, b) - max(s, a) for s, e in gaps if min(e, b) > max(s, a)]
        if not any(g > sweep_seconds for g in inside):
            out.why[gid] = "swept"
            swept += 1
            continue
        seconds = (b - a) - sum(g for g in inside if g > pause)
        if seconds <= 0:
            out.why[gid] = "pause"
            continue
        out.minutes[gid] = seconds / 60
    if all(v is None for v in out.minutes.values()):
        lost = ("swept", "no finish before it", "not run", "not in notebook")
        out.status = "swept" if swept and all(out.why.get(i) in lost for i in ids) else "no exercise measured"
    return out


def quantile(values: list[float], p: float) -> float:
    """Linear interpolation between sorted values (numpy's default): h = (n - 1) p."""
    xs = sorted(values)
    h = (len(xs) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


@dataclass
class Summary:
    lab: str
    ids: list[str]
    students: list[Student]
    pause_minutes: float
    unreadable: list[str] = field(default_factory=list)

    def rows(self) -> list[dict]:
        """Per exercise and the total: students with data, median, P75, P90 (minutes)."""
        counted = [s for s in self.students if s.status == "ok"]
        out = []
        for name, values in [(i, [s.minutes[i] for s in counted if s.minutes[i] is not None]) for i in self.ids] + \
                [("total", [s.total for s in counted if s.total is not None])]:
            row = {"exercise": name, "students": len(values)}
            for label, p in (("median", 0.5), ("p75", 0.75), ("p90", 0.9)):
                row[label] = round(quantile(values, p), 1) if values else None
            out.append(row)
        return out

    def suggestion(self) -> str:
        total = self.rows()[-1]
        if total["p75"] is None:
            return ("Suggestion: none; no student has data on every exercise, so the lab total has no P75 "
                    "(see the exercises' rows).")
        minutes = math.ceil(total["p75"] / ROUND_TO_MINUTES) * ROUND_TO_MINUTES
        return (f"Suggestion (only a suggestion): syllabus time = P75 of the total, rounded up to "
                f"{ROUND_TO_MINUTES} min = {minutes} minutes ({total['students']} students).")

    def left_out(self) -> str:
        by = {k: [s.student for s in self.students if s.status == k] for k in ("no timing", "swept")}
        text = (f"{len(self.students)} notebooks read; left out: {len(by['no timing'])} without timing, "
                f"{len(by['swept'])} with every exercise re-run back to back (no signal)")
        none = [s.student for s in self.students if s.status == "no exercise measured"]
        if none:
            text += f", {len(none)} with no exercise measured"
        if self.unreadable:
            text += f", {len(self.unreadable)} unreadable ({', '.join(self.unreadable)})"
        return text + "."

    def markdown(self) -> str:
        fmt = lambda v: "" if v is None else f"{v:g}"   # noqa: E731
        lines = [f"# Minutes per exercise, {self.lab}", "",
                 f"From the cell timing in the notebooks (the estimator: `autograder/times.py`); pauses over "
                 f"{self.pause_minutes:g} min not counted.", "",
                 "| exercise | students with data | median | P75 | P90 |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in self.rows():
            lines.append(f"| {r['exercise']} | {r['students']} | {fmt(r['median'])} | {fmt(r['p75'])} | "
                         f"{fmt(r['p90'])} |")
        return "\n".join(lines + ["", self.left_out(), "", self.suggestion(), ""])

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=["exercise", "students", "median", "p75", "p90"], lineterminator="\n")
        w.writeheader()
        for r in self.rows():
            w.writerow({k: "" if v is None else f"{v:g}" if isinstance(v, float) else v for k, v in r.items()})
        return buf.getvalue()


def _student_of(path: Path, base: Path, lab: str) -> str:
    """submitted/<student>/<lab>/x.ipynb -> student; DIR/<student>/x.ipynb -> student; DIR/x.ipynb -> x."""
    folders = [p for p in path.relative_to(base).parts[:-1] if not p.startswith(lab)]
    return folders[0] if folders else path.stem


def read_class(lab: str, folder: Path, pause_minutes: float = PAUSE_MINUTES,
               sweep_seconds: float = SWEEP_SECONDS) -> Summary:
    ids = exercises(lab)
    folder = Path(folder)
    if not folder.is_dir():
        raise TimesError(f"`--notebooks` must be a folder of submitted notebooks, got {str(folder)!r}.")
    paths = [p for p in sorted(folder.rglob("*.ipynb"))
             if not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    if not paths:
        raise TimesError(f"`--notebooks` {str(folder)!r} holds no .ipynb files.")
    students: dict[str, Student] = {}
    unreadable = []
    for p in paths:
        sid = _student_of(p, folder, lab)
        if sid in students and p.stem != lab:   # several notebooks: the one named after the lab counts
            continue
        try:
            nb = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            unreadable.append(str(p.relative_to(folder)))
            continue
        students[sid] = estimate(nb, ids, sid, pause_minutes, sweep_seconds)
    summary = Summary(lab, ids, sorted(students.values(), key=lambda s: s.student), pause_minutes, unreadable)
    if all(s.status == "no timing" for s in summary.students):
        raise TimesError(f"no notebook under `--notebooks` {str(folder)!r} has cell timing (metadata.execution; "
                         f"{len(paths)} read): was the hub's timing switch on while the class worked? "
                         "(hub/README.md, \"Timing the exercises\")")
    return summary


def add_parser(sub) -> None:
    p = sub.add_parser("times", help="minutes per exercise from the cell timing in a class's notebooks")
    p.add_argument("--lab", required=True, help="labNN")
    p.add_argument("--notebooks", required=True,
                   help="folder of submitted notebooks: nbgrader's submitted/<student>/<lab>/*.ipynb or plain .ipynb")
    p.add_argument("--out", help="folder for times-LAB.md and times-LAB.csv (default: the folder holding --notebooks)")
    p.add_argument("--pause-minutes", type=float, default=PAUSE_MINUTES,
                   help=f"a gap between runs longer than this is a pause, not counted (default {PAUSE_MINUTES:g})")
    p.add_argument("--sweep-seconds", type=float, default=SWEEP_SECONDS,
                   help="an exercise whose interval has no gap longer than this was re-run, not worked on "
                        f"(default {SWEEP_SECONDS:g})")
    p.set_defaults(func=main)


def main(args) -> int:
    for name in ("pause_minutes", "sweep_seconds"):
        value = getattr(args, name)
        if not value > 0:
            print(f"error: `--{name.replace('_', '-')}` must be > 0, got {value:g}.", file=sys.stderr)
            return 2
    try:
        summary = read_class(args.lab, Path(args.notebooks), args.pause_minutes, args.sweep_seconds)
    except TimesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.notebooks).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    md, table = out / f"times-{args.lab}.md", out / f"times-{args.lab}.csv"
    md.write_text(summary.markdown(), encoding="utf-8")
    table.write_text(summary.csv(), encoding="utf-8")
    print(summary.markdown())
    print(f"wrote {md} and {table}")
    return 0
