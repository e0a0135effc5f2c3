"""Grading time per submission before and after a change to the graders, in paired rounds.

    .venv/bin/python benchmarks/bench_grader_form.py --before a40b5a7 --labs lab05 lab06 lab07
    .venv/bin/python benchmarks/bench_grader_form.py --before REV --labs lab01 --rounds 5

The same notebooks (built once from the current tree: the lab's solution, its release, and
the first variants under autograder/variants/LAB, --per-lab in all) are graded by the standalone grader of two
checkouts: `--before` (a git revision, checked out into a temporary worktree) and the
current working tree. Each round grades the whole set on both sides, in alternating order
(before first, then after first, ...), one worker each, so both see the same machine
load; each side also grades one notebook alone per round, so the start-up (sandbox,
imports, the lab's probes) is reported apart from the steady state:

    per submission = (time for all N - time for 1) / (N - 1)

Every round checks that both sides give every submission the same verdict on every case
they both have (a change in form must not change a grade; cases added since `--before` are
listed, not compared); a difference stops the run. Reported: the
median over rounds of after/before per submission and of the start-up, with the range, and
the 1-minute load average at the start and end of each round. Writes
benchmarks/results/grader_form.json and its PNG.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
PY = os.path.abspath(sys.executable)       # the venv's interpreter (not its realpath: that is the base Python)


def build(lab: str, folder: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from autograder.tests.outcomes import submissions
    named = submissions(lab, folder / "built")
    subs = folder / "subs"
    subs.mkdir(parents=True, exist_ok=True)
    out = []
    for name, path in sorted(named.items()):
        if name.endswith("_zh"):
            continue
        dest = subs / f"{name}.ipynb"
        shutil.copy(path, dest)
        out.append(dest)
    return out


def grade(tree: Path, lab: str, notebooks: list[Path], out: Path) -> tuple[float, dict]:
    """Seconds for one `python -m autograder grade` of `notebooks` in checkout `tree`, and the verdicts."""
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    proc = subprocess.run([PY, "-m", "autograder", "grade", *map(str, notebooks), "--lab", lab, "--out", str(out),
                           "--workers", "1", "--force", "--quiet"], cwd=tree, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"grading in {tree} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    verdicts = {}
    for nb in notebooks:
        if not (out / "students" / f"{nb.stem}.json").is_file():
            raise SystemExit(f"grading in {tree} wrote no record for {nb.name}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        rec = json.loads((out / "students" / f"{nb.stem}.json").read_text(encoding="utf-8"))
        verdicts[nb.stem] = {f"{t['name']}/{c['name']}": [bool(c["passed"]), float(c["points"])]
                             for t in rec["tests"] for c in t["cases"]}
    return seconds, verdicts


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4), "rounds": [round(v, 4) for v in values]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="git revision of the graders to compare with")
    ap.add_argument("--labs", nargs="+", default=["lab05", "lab06", "lab07"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-lab", type=int, default=8,
                    help="notebooks per lab: the solution, the release and the first variants by name")
    ap.add_argument("--out-stem", default="grader_form")
    args = ap.parse_args(argv)
    rev = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    report = {"before": rev, "after": f"working tree at {head}", "rounds": args.rounds, "cpus": os.cpu_count(),
              "labs": {}}
    with tempfile.TemporaryDirectory(prefix="grader-form-") as tmp:
        tmp = Path(tmp)
        old = tmp / "before"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), rev], cwd=ROOT, check=True)
        try:
            for lab in args.labs:
                notebooks = build(lab, tmp / lab)
                first = [nb for nb in notebooks if nb.stem in ("solution", "release")]
                notebooks = first + [nb for nb in notebooks if nb not in first][:max(0, args.per_lab - len(first))]
                sides = {"before": old, "after": ROOT}
                per_sub = {s: [] for s in sides}
                startup = {s: [] for s in sides}
                loads = []
                for r in range(args.rounds):
                    order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                    load0 = os.getloadavg()[0]
                    verdicts = {}
                    for side in order:
                        t_one, _ = grade(sides[side], lab, notebooks[:1], tmp / lab / f"{side}-one")
                        t_all, verdicts[side] = grade(sides[side], lab, notebooks, tmp / lab / f"{side}-all")
                        per_sub[side].append((t_all - t_one) / (len(notebooks) - 1))
                        startup[side].append(t_one)
                    loads.append([round(load0, 2), round(os.getloadavg()[0], 2)])
                    # cases both graders have (a later commit may add cases: those are reported, not compared)
                    shared = {nb: set(verdicts["before"][nb]) & set(verdicts["after"][nb]) for nb in verdicts["before"]}
                    bad = [f"{nb}/{c}" for nb, cases in shared.items() for c in sorted(cases)
                           if verdicts["before"][nb][c] != verdicts["after"][nb][c]]
                    if bad:
                        raise SystemExit(f"{lab}: the two graders disagree on {bad[:20]}")
                    only_after = sorted(set(verdicts["after"][notebooks[0].stem]) - set(verdicts["before"][notebooks[0].stem]))
                    print(f"{lab} round {r + 1}: per submission before {per_sub['before'][-1]:.2f} s, "
                          f"after {per_sub['after'][-1]:.2f} s (load {loads[-1]})", flush=True)
                ratios = [a / b for a, b in zip(per_sub["after"], per_sub["before"])]
                report["labs"][lab] = {
                    "submissions": len(notebooks), "verdicts_equal_every_round": True,
                    "cases_compared": len(shared[notebooks[0].stem]), "cases_only_after": only_after,
                    "per_submission_s": {s: spread(v) for s, v in per_sub.items()},
                    "startup_s": {s: spread(v) for s, v in startup.items()},
                    "after_over_before_per_submission": spread(ratios),
                    "load_average_1min": loads}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.out_stem}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"{'lab':6} {'n':>3} {'before s/sub':>13} {'after s/sub':>12} {'after/before':>22}")
    for lab, row in report["labs"].items():
        r = row["after_over_before_per_submission"]
        print(f"{lab:6} {row['submissions']:>3} {row['per_submission_s']['before']['median']:>13.2f} "
              f"{row['per_submission_s']['after']['median']:>12.2f} "
              f"{r['median']:>8.2f} [{r['min']:.2f}-{r['max']:.2f}]")
    plot(report, OUT / f"{args.out_stem}.png")
    return 0


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labs = list(report["labs"])
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(labs), 3.4))
    for k, side in enumerate(("before", "after")):
        med = [report["labs"][lab]["per_submission_s"][side]["median"] for lab in labs]
        lo = [m - report["labs"][lab]["per_submission_s"][side]["min"] for m, lab in zip(med, labs)]
        hi = [report["labs"][lab]["per_submission_s"][side]["max"] - m for m, lab in zip(med, labs)]
        xs = [i + (k - 0.5) * 0.38 for i in range(len(labs))]
        ax.bar(xs, med, width=0.36, yerr=[lo, hi], capsize=3,
               label=f"{side} ({report['before'] if side == 'before' else report['after']})")
    ax.set_xticks(range(len(labs)), labs)
    ax.set_ylabel("seconds per submission (steady state)")
    ax.set_title(f"Standalone grading, one worker:\nmedian of {report['rounds']} paired rounds (bars: range)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
