"""Grading speed: the standalone grader at class scale, and against `nbgrader autograde`
on the same submissions, in paired rounds.

    .venv/bin/python benchmarks/bench_grading.py                          # lab01: 200 + 2 paired rounds
    .venv/bin/python benchmarks/bench_grading.py --lab lab07 --n 50
    .venv/bin/python benchmarks/bench_grading.py --n 40 --rounds 2 --per-round 3   # a smaller, stated size

Submissions are generated from the lab's solution, its unsolved release and every variant
(autograder/variants/LAB: bug_* and correct_*), cycled until there are --n of them; lab00
adds the adversarial notebooks that are safe to run without a sandbox (nbgrader runs code
as the current user in an ordinary kernel).

1. **Scale** (standalone only): all --n submissions with --workers workers (default 2).
   Reported apart: start-up (the call to the moment every worker has returned its first
   notebook: sandbox zygote, imports, the lab's probes, one notebook each) and the steady
   state (the remaining notebooks: wall time / count, and the median of each notebook's own
   grading time).
2. **Paired rounds** (--rounds, default 2, of --per-round submissions, default 4): each round
   takes the next --per-round submissions and grades exactly those with both harnesses, in
   alternating order (standalone first, then nbgrader first, ...). nbgrader is one process
   grading one notebook at a time, so the standalone side runs with one worker here. One
   scratch nbgrader course serves every round: its `generate_assignment` (the assignment
   build) runs once and is reported apart, and each round's `nbgrader autograde` has its
   start-up (to the first student) timed apart from its per-notebook time, read from the
   moment each student's line appears in its log. Every round checks that both harnesses
   give every submission the same score, and the ratio nbgrader / standalone per
   notebook is the median over rounds of the ratio within a round, with its range.
The 1-minute load average is recorded before and after every phase and round.
Writes benchmarks/results/grading.json (or --out-stem) and its PNG.

3. **Where a submission's time goes** (--phases N, instead of 1 and 2): N submissions
   with one worker, the time of each step of the standalone harness summed per
   submission over the steady state (every submission after the first): the child's
   boot (fork from the worker's zygote, run the notebook's cells), the probe round trips
   (one per case), the parent's pytest run that judges the observations, the reports.
   Writes benchmarks/results/grading_phases_LAB.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.batch import Entry, grade_batch  # noqa: E402
from autograder.core import get_tests  # noqa: E402
from autograder.isolation import Sandbox  # noqa: E402
from autograder.release import nbgrader_env  # noqa: E402
from autograder.tests import adversarial  # noqa: E402
from autograder.tests.submissions import from_variant, solution, with_solution_code, write  # noqa: E402

# not fake_passed: its writes into every file descriptor corrupt the kernel's ZMQ channels and
# `nbgrader autograde` then waits forever on that notebook (measured; the standalone grader
# shrugs it off, see test_adversarial)
SAFE_ATTACKS = ("monkeypatch", "eq_cheat", "read_reference", "recursion", "exit_in_function")
clock = time.perf_counter


def load() -> float:
    return round(os.getloadavg()[0], 2)


def spread(xs) -> dict:
    xs = sorted(xs)
    return {"median": round(statistics.median(xs), 3), "min": round(xs[0], 3), "max": round(xs[-1], 3),
            "n": len(xs)} if xs else {}


def build(lab: str, n: int, folder: Path) -> dict[str, tuple[str, Path]]:
    """student -> (kind, notebook): the lab's solution, release and variants, cycled."""
    variants = sorted((ROOT / "autograder" / "variants" / lab).glob("*.py"))
    pool: list[tuple[str, Path]] = [("solution", solution(lab))]
    pool.append(("release", sorted((ROOT / "labs" / lab).glob("*.ipynb"))[0]))
    for v in variants:
        pool.append((v.stem, write(from_variant(lab, v), folder / "_src" / f"{v.stem}.ipynb")))
    if lab == "lab00":
        for name in SAFE_ATTACKS:
            src = adversarial.sources()[name].read_text()
            pool.append((f"adv_{name}", write(with_solution_code(lab, {}, first=src),
                                              folder / "_src" / f"adv_{name}.ipynb")))
    out = {}
    for i in range(n):
        kind, src = pool[i % len(pool)]
        sid = f"s{i:03d}_{kind}"
        dest = folder / "subs" / sid / f"{lab}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
        out[sid] = (kind, dest)
    return out


# ---------------------------------------------------------------- standalone

def standalone(lab: str, subs: dict, out: Path, workers: int) -> dict:
    """Grade `subs` with grade_batch; the times at which each record came back."""
    done: list[tuple[float, dict]] = []
    before = load()
    t0 = clock()
    grade_batch([Entry(s, p) for s, (_, p) in subs.items()], lab, out, workers=workers, progress=False,
                on_record=lambda rec: done.append((clock(), rec)))
    total = clock() - t0
    if len(done) != len(subs):
        raise SystemExit(f"standalone graded {len(done)} of {len(subs)} submissions")
    times = [t - t0 for t, _ in done]
    w = min(workers, len(subs))
    steady_n = len(subs) - w
    return {"workers": workers, "submissions": len(subs), "total_s": round(total, 3),
            "startup_s": round(times[w - 1], 3),       # every worker has its sandbox and one notebook done
            "steady_s_per_submission": round((times[-1] - times[w - 1]) / steady_n, 4) if steady_n else None,
            "each_notebook_s": spread(rec["seconds"] for _, rec in done[w:]) if steady_n else {},
            "scores": {rec["student"]: rec["score"] for _, rec in done},
            "load_average_1min": [before, load()]}


def phases(lab: str, subs: dict, out: Path) -> dict:
    """Grade `subs` with one worker, timing each step of the harness (see the docstring)."""
    import collections

    import autograder.batch as batch
    import autograder.plugin as plugin
    from autograder.isolation import driver

    spent: dict = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    steps = [(driver._ChildProcess, "boot", "child boot (fork, run the cells)"),
             (driver._ChildProcess, "probe", "probe round trips (one per case)"),
             (driver._ChildProcess, "close", "child close"),
             (plugin, "judge_pending", "judge (pytest in the parent)"),
             (batch.reports, "write_student", "reports")]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in steps]

    def timed(fn, key):
        def wrapper(*a, **kw):
            t = clock()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] += clock() - t
                calls[key] += 1
        return wrapper

    marks = []
    for (owner, name, key), (_, _, fn) in zip(steps, originals):
        setattr(owner, name, timed(fn, key))
    before = load()
    try:
        t0 = clock()
        grade_batch([Entry(s, p) for s, (_, p) in subs.items()], lab, out, workers=1, progress=False,
                    on_record=lambda rec: marks.append((clock() - t0, dict(spent), dict(calls), rec["seconds"])))
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)
    (first, s0, c0, _), (last, s1, c1, _) = marks[0], marks[-1]
    k = len(marks) - 1
    if k < 1:
        raise SystemExit("--phases needs at least 2 submissions (the first one carries the start-up)")
    each = {key: round((s1[key] - s0.get(key, 0)) / k, 3) for _, _, key in steps}
    return {"submissions": len(subs), "startup_s": round(first, 3),
            "steady_s_per_submission": round((last - first) / k, 3), "phases_s_per_submission": each,
            "calls_per_submission": {key: round((c1[key] - c0.get(key, 0)) / k, 1) for _, _, key in steps},
            "each_notebook_s": spread(m[3] for m in marks[1:]), "load_average_1min": [before, load()]}


# ---------------------------------------------------------------- nbgrader

class NbgraderCourse:
    """One scratch nbgrader course: the assignment built once, then autograde runs on
    chosen students, each timed from its log."""

    STUDENT = re.compile(r"Creating/updating student with ID '([^']+)'")

    def __init__(self, lab: str, workdir: Path) -> None:
        self.lab, self.workdir = lab, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "nbgrader_config.py", workdir / "nbgrader_config.py")
        shutil.copytree(ROOT / "solutions" / lab, workdir / "solutions" / lab, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        self.name = solution(lab).name
        t0 = clock()
        self._run("generate_assignment", lab, "--force")
        self.build_s = round(clock() - t0, 3)

    def _run(self, *args) -> list[tuple[float, str]]:
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=self.workdir, env=nbgrader_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = [(clock(), line) for line in proc.stdout]
        lines.append((clock(), ""))
        if proc.wait() != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{''.join(x for _, x in lines)[-3000:]}")
        return lines

    def autograde(self, subs: dict, tag: str) -> dict:
        """Grade subs ({student: (kind, notebook)}) under ids '<tag>_<student>'."""
        from nbgrader.api import Gradebook
        for student, (_, path) in subs.items():
            dest = self.workdir / "course" / "nbgrader" / "submitted" / f"{tag}_{student}" / self.lab / self.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
        before = load()
        t0 = clock()
        lines = self._run("autograde", self.lab, "--force", "--student", f"{tag}_*")
        end = clock()
        starts = [(t, m.group(1)) for t, line in lines if (m := self.STUDENT.search(line))]
        if len(starts) != len(subs):
            raise SystemExit(f"nbgrader autograded {len(starts)} of {len(subs)} submissions")
        # a student's notebook takes from its line to the next student's line (the last: to exit)
        each = [b[0] - a[0] for a, b in zip(starts, starts[1:] + [(end, None)])]
        scores = {}
        with Gradebook("sqlite:///" + str(self.workdir / "course" / "nbgrader" / "gradebook.db")) as gb:
            for student in subs:
                sub = gb.find_submission(self.lab, f"{tag}_{student}")
                scores[student] = sum(float(g.score) for nb in sub.notebooks for g in nb.grades)
        return {"submissions": len(subs), "total_s": round(end - t0, 3),
                "startup_s": round(starts[0][0] - t0, 3),             # the autograde app, to its first student
                "steady_s_per_submission": round(statistics.mean(each), 4), "each_notebook_s": spread(each),
                "scores": scores, "load_average_1min": [before, load()]}


# ---------------------------------------------------------------- the run

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", default="lab01")
    ap.add_argument("--n", type=int, default=200, help="submissions graded at scale by the standalone grader")
    ap.add_argument("--workers", type=int, default=2, help="standalone workers at scale")
    ap.add_argument("--rounds", type=int, default=2, help="paired rounds against nbgrader (0: none)")
    ap.add_argument("--per-round", type=int, default=4, help="submissions per paired round")
    ap.add_argument("--out-stem", default=None, help="results file stem (default grading_LAB)")
    ap.add_argument("--phases", type=int, default=0,
                    help="instead: time each step of the standalone harness over this many submissions")
    ap.add_argument("--replot", action="store_true", help="only redraw results/STEM.png from results/STEM.json")
    args = ap.parse_args(argv)
    out = ROOT / "benchmarks" / "results" / f"{args.out_stem or 'grading_' + args.lab}.json"   # the scale run's
    if args.replot:
        _plot(json.loads(out.read_text(encoding="utf-8")), out.with_suffix(".png"))
        print(f"wrote {out.with_suffix('.png')}")
        return 0
    if args.phases:
        with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
            got = phases(args.lab, build(args.lab, args.phases, Path(tmp)), Path(tmp) / "out")
        phases_out = ROOT / "benchmarks" / "results" / f"{args.out_stem or 'grading_phases_' + args.lab}.json"
        phases_out.write_text(json.dumps({"lab": args.lab, "cpu_count": os.cpu_count(), **got}, indent=1) + "\n")
        print(f"{args.lab}, one worker, {got['submissions']} submissions: start-up (first) {got['startup_s']} s, "
              f"then {got['steady_s_per_submission']} s per submission; load {got['load_average_1min']}")
        for key, sec in got["phases_s_per_submission"].items():
            print(f"  {key:36} {sec:7.3f} s per submission ({got['calls_per_submission'][key]} calls)")
        print(f"wrote {phases_out}")
        return 0
    for name, lo in (("n", 1), ("workers", 1), ("rounds", 0), ("per_round", 1)):
        if getattr(args, name) < lo:
            ap.error(f"`--{name.replace('_', '-')}` must be an integer >= {lo}, got {getattr(args, name)}.")
    if args.rounds * args.per_round > args.n:
        ap.error(f"`--rounds` x `--per-round` must be at most --n={args.n}, got {args.rounds * args.per_round}.")

    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        subs = build(args.lab, args.n, tmp)
        print(f"standalone, {args.n} submissions, {args.workers} worker(s) ...", file=sys.stderr)
        scale = standalone(args.lab, subs, tmp / "scale", args.workers)
        rounds, build_s = [], None
        if args.rounds:
            print("nbgrader: building the assignment ...", file=sys.stderr)
            course = NbgraderCourse(args.lab, tmp / "nbgrader")
            build_s = course.build_s
            names = list(subs)
            for r in range(args.rounds):
                chunk = {s: subs[s] for s in names[r * args.per_round:(r + 1) * args.per_round]}
                order = ("standalone", "nbgrader") if r % 2 == 0 else ("nbgrader", "standalone")
                got = {}
                for harness in order:
                    print(f"round {r + 1}/{args.rounds}: {harness}, {len(chunk)} submissions ...", file=sys.stderr)
                    got[harness] = (standalone(args.lab, chunk, tmp / f"round{r}", 1) if harness == "standalone"
                                    else course.autograde(chunk, f"r{r}"))
                differ = {s: (got["standalone"]["scores"][s], got["nbgrader"]["scores"][s]) for s in chunk
                          if got["standalone"]["scores"][s] != got["nbgrader"]["scores"][s]}
                rounds.append({"order": list(order), "students": list(chunk),
                               "kinds": [subs[s][0] for s in chunk], **got,
                               "scores_equal": not differ,
                               "score_differences": {s: {"standalone": a, "nbgrader": b, "kind": subs[s][0]}
                                                     for s, (a, b) in differ.items()},
                               "ratio_nbgrader_over_standalone": round(
                                   got["nbgrader"]["steady_s_per_submission"]
                                   / got["standalone"]["steady_s_per_submission"], 2)
                               if got["standalone"]["steady_s_per_submission"] else None})

    kinds: dict[str, int] = {}
    for kind, _ in subs.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    ratios = [r["ratio_nbgrader_over_standalone"] for r in rounds if r["ratio_nbgrader_over_standalone"]]
    result = {
        "lab": args.lab, "submissions": args.n, "mix": kinds, "cpu_count": os.cpu_count(),
        "platform": platform.platform(), "python": platform.python_version(), "sandbox": Sandbox.detect().describe(),
        "max_score": sum(t.points for t in get_tests(args.lab).values()),
        "scale": {k: v for k, v in scale.items() if k != "scores"},
        "nbgrader_assignment_build_s": build_s,
        "paired_rounds": [{**r, "standalone": {k: v for k, v in r["standalone"].items() if k != "scores"},
                           "nbgrader": {k: v for k, v in r["nbgrader"].items() if k != "scores"}} for r in rounds],
        "per_round": args.per_round,
        "ratio_nbgrader_over_standalone_per_submission": spread(ratios) if ratios else None,
        "scores_equal_every_round": all(r["scores_equal"] for r in rounds),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    _plot(result, out.with_suffix(".png"))

    s = result["scale"]
    print(f"\n{args.lab}: {args.n} submissions ({len(kinds)} kinds), standalone with {args.workers} worker(s): "
          f"start-up {s['startup_s']:.1f} s (sandbox, imports and one notebook per worker), then "
          f"{s['steady_s_per_submission']} s per submission (each notebook's own time: median "
          f"{s['each_notebook_s'].get('median')} s), {s['total_s']:.1f} s in all; load {s['load_average_1min']}")
    if rounds:
        print(f"nbgrader assignment build (generate_assignment, once): {build_s:.1f} s")
        print(f"{'round':>5} {'order':>22} {'standalone s/nb':>16} {'nbgrader s/nb':>14} {'nbgrader start-up':>18} "
              f"{'ratio':>6}  scores equal")
        for i, r in enumerate(rounds):
            print(f"{i + 1:>5} {' then '.join(r['order']):>22} {r['standalone']['steady_s_per_submission']:>16} "
                  f"{r['nbgrader']['steady_s_per_submission']:>14} {r['nbgrader']['startup_s']:>18} "
                  f"{r['ratio_nbgrader_over_standalone']:>6}  {r['scores_equal']}")
        rr = result["ratio_nbgrader_over_standalone_per_submission"]
        print(f"nbgrader / standalone (1 worker each) per submission: median {rr['median']}x "
              f"[{rr['min']}-{rr['max']}] over {rr['n']} rounds")
    print(f"wrote {out} and {out.with_suffix('.png').name}")
    return 0 if result["scores_equal_every_round"] else 1


def _plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _plots import plain_log_axis
    s = result["scale"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.2))
    a.barh(["start-up\n(per worker)", "steady state\n(per submission)"], [s["startup_s"], s["steady_s_per_submission"]],
           color="#4c72b0")
    a.set_xlabel("seconds")
    a.set_title(f"standalone, {result['submissions']} {result['lab']} submissions, {s['workers']} workers", fontsize=9)
    rounds = result["paired_rounds"]
    if rounds:
        x = range(len(rounds))
        b.bar([i - 0.2 for i in x], [r["standalone"]["steady_s_per_submission"] for r in rounds], 0.4,
              label="standalone (1 worker)", color="#4c72b0")
        b.bar([i + 0.2 for i in x], [r["nbgrader"]["steady_s_per_submission"] for r in rounds], 0.4,
              label="nbgrader autograde", color="#dd8452")
        b.set_yscale("log")
        plain_log_axis(b.yaxis)                              # 0.2, 0.5, 1, 2 (not 2 x 10^-1)
        lowest = min(r[side]["steady_s_per_submission"] for r in rounds for side in ("standalone", "nbgrader"))
        b.set_ylim(bottom=0.75 * lowest)                     # room for a labelled tick under the lowest bar
        b.set_xticks(list(x), [f"round {i + 1}" for i in x])
        b.set_ylabel("s per submission, steady state")
        rr = result["ratio_nbgrader_over_standalone_per_submission"]
        b.set_title(f"the same {result['per_round']} submissions per round\nnbgrader / standalone "
                    f"{rr['median']:.1f}x [{rr['min']:.1f}-{rr['max']:.1f}]", fontsize=9)
        b.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # beside the bars, not on them
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
