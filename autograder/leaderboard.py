"""A class's performance figures, ranked: `python -m autograder leaderboard`.

    python -m autograder leaderboard --lab lab07 --grades grades/lab07 [--by ttft_p95] [--anonymous]

reads the per-student JSON records a graded folder holds (GRADES/students/*.json, written
by `python -m autograder grade`) and writes, next to them,

    GRADES/leaderboard.md    a Markdown table, fastest first
    GRADES/leaderboard.csv   the same rows
    GRADES/leaderboard.png   makespan and P95 TTFT per student, the reference's as lines

The figures are the ones lab07's performance cases record (test_performance.py): makespan,
mean and P95 TTFT and P95 TPOT in seconds of the grader's FakeClock, with the reference
engine's beside them. They are exact numbers of a fixed workload on a cost model, so the
ranking is the same on every machine and every run; it never times anything itself. Rows
are sorted by one figure (`--by`, makespan unless told), then the others in FIGURES order,
then student id: designs trade one figure for another (a policy that lets small requests
go first cuts TTFT and can lengthen the makespan), so an instructor says which one the
class competes on. Students without figures (their engine could not run the workload, or
tokens differed from the solo runs) come last. When
the folder has the batch's grades.csv, only the students it lists are ranked: the batch
writes it from the records it signed.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

FIGURES = ("makespan", "ttft_mean", "ttft_p95", "tpot_p95")
COLUMNS = ("rank", "student", "score", "max_score", *FIGURES, "makespan_vs_reference", "ttft_p95_vs_reference")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def figures(rec: dict) -> dict | None:
    """The performance figures a record holds ({figure: seconds, "reference_" + figure: seconds}),
    from the first case whose `got` has every figure as a number; None when none has."""
    for t in rec.get("tests", []) if isinstance(rec.get("tests"), list) else []:
        for c in t.get("cases", []) if isinstance(t, dict) and isinstance(t.get("cases"), list) else []:
            got = c.get("got") if isinstance(c, dict) else None
            if isinstance(got, dict) and all(_number(got.get(k)) for k in FIGURES):
                return {k: float(v) for k, v in got.items() if _number(v)
                        and (k in FIGURES or k.removeprefix("reference_") in FIGURES)}
    return None


def _listed(grades: Path) -> set[str] | None:
    path = Path(grades) / "grades.csv"
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        return {row["student_id"] for row in csv.DictReader(f) if row.get("student_id")}


def rows(grades: Path, lab: str, *, anonymous: bool = False, by: str = "makespan") -> tuple[list[dict], dict | None]:
    """(one row per student of `lab`, ranked by `by`, the others breaking ties; the reference's
    figures or None)."""
    from . import reports
    if by not in FIGURES:
        raise ValueError(f"`by` must be one of {', '.join(FIGURES)}, got {by!r}.")
    order = (by, *(k for k in FIGURES if k != by))
    listed = _listed(grades)
    recs = [r for s, r in reports.load_records(grades).items()
            if r.get("lab") == lab and (listed is None or s in listed)]
    out, reference = [], None
    for rec in recs:
        f = figures(rec)
        row = {"student": str(rec["student"]), "score": rec.get("score"), "max_score": rec.get("max_score")}
        if f is not None:
            row.update({k: f[k] for k in FIGURES})
            ref = {k: f.get(f"reference_{k}") for k in FIGURES}
            if all(_number(v) and v > 0 for v in ref.values()):
                reference = reference or ref
                row["makespan_vs_reference"] = round(f["makespan"] / ref["makespan"], 4)
                row["ttft_p95_vs_reference"] = round(f["ttft_p95"] / ref["ttft_p95"], 4)
        out.append(row)
    out.sort(key=lambda r: (r.get(by) is None, *(r.get(k) or 0.0 for k in order), r["student"]))
    for i, r in enumerate(out, start=1):
        r["rank"] = i if r.get(by) is not None else None
        if anonymous:
            r["student"] = f"student {i}"
    return out, reference


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 100 else f"{v:g}"
    return str(v)


def table_csv(ranked: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in ranked:
        w.writerow([_cell(r.get(k)) if k not in ("score", "max_score") or r.get(k) is None else f"{r[k]:g}"
                    for k in COLUMNS])
    return buf.getvalue()


def table_markdown(ranked: list[dict], lab: str, reference: dict | None, by: str = "makespan") -> str:
    from .reports import markdown_text
    head = [f"# {lab} performance leaderboard", "",
            "Seconds of the grader's FakeClock on the lab's fixed workload (the same on every machine); "
            f"ranked by {by}, lowest first. A student without figures could not be timed (see their feedback).", ""]
    if reference is not None:
        head += ["Reference engine: " + ", ".join(f"{k} {reference[k]:.4f}" for k in FIGURES), ""]
    names = ("rank", "student", "score", "makespan", "ttft_mean", "ttft_p95", "tpot_p95", "makespan_vs_reference",
             "ttft_p95_vs_reference")
    lines = ["| " + " | ".join(names) + " |", "|" + " --- |" * len(names)]
    for r in ranked:
        score = "" if r.get("score") is None else f"{r['score']:g}/{r['max_score']:g}"
        cells = [_cell(r.get("rank")), markdown_text(r["student"]), score,
                 *(_cell(r.get(k)) for k in names[3:])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(head + lines) + "\n"


def plot(ranked: list[dict], reference: dict | None, path: Path, lab: str) -> Path:
    """Makespan and P95 TTFT per timed student (bars), the reference's as dashed lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in ranked if r.get("makespan") is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, max(2.5, 0.35 * len(timed) + 1.5)), sharey=True)
    labels = [r["student"] for r in timed]
    for ax, key, title in ((axes[0], "makespan", "makespan (s)"), (axes[1], "ttft_p95", "P95 TTFT (s)")):
        ax.barh(range(len(timed)), [r[key] for r in timed], color="#4c72b0")
        if reference is not None:
            ax.axvline(reference[key], color="black", ls="--", lw=1, label="reference")
            ax.legend(fontsize=8, loc="lower right")
        ax.set_xlabel(title)
    axes[0].set_yticks(range(len(timed)), labels)
    axes[0].invert_yaxis()
    fig.suptitle(f"{lab}: performance on the fixed workload (cost model, FakeClock)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(grades: Path, lab: str, *, anonymous: bool = False, by: str = "makespan") -> tuple[dict[str, Path], list[dict]]:
    """Write leaderboard.md, .csv and .png into `grades`; return their paths and the ranked rows."""
    from .reports import write_atomic
    grades = Path(grades)
    ranked, reference = rows(grades, lab, anonymous=anonymous, by=by)
    paths = {"md": grades / "leaderboard.md", "csv": grades / "leaderboard.csv", "png": grades / "leaderboard.png"}
    write_atomic(paths["md"], table_markdown(ranked, lab, reference, by))
    write_atomic(paths["csv"], table_csv(ranked))
    plot(ranked, reference, paths["png"], lab)
    return paths, ranked


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="rank a graded folder by the performance figures (table and PNG)")
    p.add_argument("--lab", required=True, help="labNN (lab07 records the figures)")
    p.add_argument("--grades", required=True, help="a folder written by `grade --out` (its students/*.json)")
    p.add_argument("--by", default="makespan", help=f"the figure to rank by, lowest first: {', '.join(FIGURES)} "
                                                    "(default makespan)")
    p.add_argument("--anonymous", action="store_true", help="show ranks as 'student N' instead of student ids")
    p.set_defaults(func=main)


def main(args) -> int:
    import sys

    from .cli import _labs
    if args.lab not in _labs():
        print(f"error: `--lab` must be one of {', '.join(_labs())}, got {args.lab!r}.", file=sys.stderr)
        return 2
    if args.by not in FIGURES:
        print(f"error: `--by` must be one of {', '.join(FIGURES)}, got {args.by!r}.", file=sys.stderr)
        return 2
    grades = Path(args.grades)
    if not (grades / "students").is_dir():
        print(f"error: `--grades` must be a folder written by `python -m autograder grade --out`, with a "
              f"students/ folder; got {str(grades)!r}.", file=sys.stderr)
        return 2
    paths, ranked = write(grades, args.lab, anonymous=args.anonymous, by=args.by)
    timed = sum(r.get("makespan") is not None for r in ranked)
    print(f"{args.lab}: {timed} of {len(ranked)} students timed; wrote {paths['md']}, {paths['csv']}, {paths['png']}")
    return 0
