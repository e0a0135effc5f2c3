"""Grading speed: the standalone grader vs `nbgrader autograde`, same 50 submissions.

    .venv/bin/python benchmarks/bench_grading.py [--lab lab01] [--n 50] [--workers N] [--no-serial]

The standalone grader starts one sandboxed zygote per worker (torch, the course library and
the lab's probes imported once) and forks a child per submission inside it, so its
per-submission cost is the student's cells and probes, not an interpreter start.

The batch mixes correct notebooks (the solution and the correct_* variants), the
unsolved release, every bug_* variant and the adversarial submissions that are safe to
run WITHOUT a sandbox (nbgrader runs code in an ordinary kernel as the current user:
the corpus's kill/disk/memory/hang attacks would harm the machine there, so they are
left out of the nbgrader side and of this batch). It grades the batch
  * standalone with the default worker count (the core count) and, unless --no-serial,
    with one worker (a per-core figure comparable to nbgrader, which grades one
    notebook at a time);
  * with the real `nbgrader autograde` in a scratch course;
and prints seconds per submission, the ratio, and where the two harnesses' scores differ
(expected only for attacks on nbgrader's in-kernel harness). Writes
benchmarks/results/grading.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.batch import Entry, grade_batch  # noqa: E402
from autograder.core import get_tests  # noqa: E402
from autograder.isolation import Sandbox  # noqa: E402
from autograder.tests import adversarial  # noqa: E402
from autograder.tests.submissions import (from_variant, nbgrader_autograde, solution,  # noqa: E402
                                          with_solution_code, write)

# not fake_passed: its writes into every file descriptor corrupt the kernel's ZMQ channels and
# `nbgrader autograde` then waits forever on that notebook (measured; the standalone grader
# shrugs it off, see test_adversarial)
SAFE_ATTACKS = ("monkeypatch", "eq_cheat", "read_reference", "recursion", "exit_in_function")


def build(lab: str, n: int, folder: Path) -> dict[str, tuple[str, Path]]:
    """student -> (kind, notebook)."""
    variants = sorted((ROOT / "autograder" / "variants" / lab).glob("*.py"))
    pool: list[tuple[str, Path]] = [("solution", solution(lab))]
    rel = sorted((ROOT / "labs" / lab).glob("*.ipynb"))
    pool.append(("release", rel[0]))
    for v in variants:
        pool.append((v.stem, write(from_variant(lab, v), folder / "_src" / f"{v.stem}.ipynb")))
    if lab == "lab00":
        for name in SAFE_ATTACKS:
            src = adversarial.sources()[name].read_text()
            pool.append((f"adv_{name}", write(with_solution_code(lab, {}, first=src), folder / "_src" / f"adv_{name}.ipynb")))
    out = {}
    for i in range(n):
        kind, src = pool[i % len(pool)]
        sid = f"s{i:03d}_{kind}"
        dest = folder / "subs" / sid / f"{lab}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
        out[sid] = (kind, dest)
    return out


def standalone(lab, subs, out: Path, workers: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    grade_batch([Entry(s, p) for s, (_, p) in subs.items()], lab, out, workers=workers, progress=True)
    dt = time.perf_counter() - t0
    scores = {}
    for p in (out / "students").glob("*.json"):
        rec = json.loads(p.read_text())
        scores[rec["student"]] = rec["score"]
    return dt, scores


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", default="lab01")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-serial", action="store_true", help="skip the one-worker standalone run")
    ap.add_argument("--nbgrader-n", type=int, default=None,
                    help="autograde only the first N of the same submissions with nbgrader (a busy machine: "
                         "nbgrader runs every cell of every notebook); per-submission times stay comparable")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    if args.n < 1:
        ap.error(f"`--n` must be at least 1, got {args.n}.")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        subs = build(args.lab, args.n, tmp)
        runs = {}
        print(f"standalone, {args.workers} worker(s) ...", file=sys.stderr)
        runs["standalone"] = standalone(args.lab, subs, tmp / "out-par", args.workers)
        if not args.no_serial and args.workers != 1:
            print("standalone, 1 worker ...", file=sys.stderr)
            runs["standalone_1_worker"] = standalone(args.lab, subs, tmp / "out-serial", 1)
        nb_subs = dict(list(subs.items())[:args.nbgrader_n or len(subs)])
        print(f"nbgrader autograde ({len(nb_subs)} submissions) ...", file=sys.stderr)
        t0 = time.perf_counter()
        nb_scores = nbgrader_autograde(args.lab, {s: p for s, (_, p) in nb_subs.items()}, tmp / "nbgrader")
        runs["nbgrader"] = (time.perf_counter() - t0, {s: sum(v.values()) for s, v in nb_scores.items()})

    n = len(subs)
    counts = {k: (len(nb_subs) if k == "nbgrader" else n) for k in runs}
    per = {k: v[0] / counts[k] for k, v in runs.items()}
    mine = runs["standalone"][1]
    theirs = runs["nbgrader"][1]
    differ = sorted({(subs[s][0], mine.get(s), theirs.get(s)) for s in nb_subs if mine.get(s) != theirs.get(s)})
    kinds = {}
    for s, (kind, _) in subs.items():
        kinds.setdefault(kind, 0)
        kinds[kind] += 1
    result = {
        "lab": args.lab, "submissions": n, "submissions_nbgrader": len(nb_subs), "mix": kinds,
        "workers": args.workers, "load_average_at_start": load0,
        "cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "sandbox": Sandbox.detect().describe(), "max_score": sum(t.points for t in get_tests(args.lab).values()),
        "seconds_total": {k: round(v[0], 2) for k, v in runs.items()},
        "seconds_per_submission": {k: round(v, 3) for k, v in per.items()},
        "ratio_nbgrader_over_standalone": round(per["nbgrader"] / per["standalone"], 2),
        "ratio_nbgrader_over_standalone_1_worker": (round(per["nbgrader"] / per["standalone_1_worker"], 2)
                                                   if "standalone_1_worker" in per else None),
        "score_differences": [{"kind": k, "standalone": a, "nbgrader": b} for k, a, b in differ],
    }
    out = ROOT / "benchmarks" / "results" / "grading.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    _plot(result, out.with_suffix(".png"))

    print(f"\nGrading {n} {args.lab} submissions ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))})")
    print(f"{'harness':<28}{'notebooks':>10}{'total s':>10}{'s / submission':>16}")
    for k in runs:
        print(f"{k:<28}{counts[k]:>10}{runs[k][0]:>10.1f}{per[k]:>16.2f}")
    print(f"nbgrader / standalone: {result['ratio_nbgrader_over_standalone']}x"
          + (f"  (vs 1 worker: {result['ratio_nbgrader_over_standalone_1_worker']}x)"
             if result["ratio_nbgrader_over_standalone_1_worker"] else ""))
    if differ:
        print("scores that differ (standalone vs nbgrader):")
        for d in result["score_differences"]:
            print(f"  {d['kind']:<32} standalone {d['standalone']:g}  nbgrader {d['nbgrader']:g}")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


def _plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    per = result["seconds_per_submission"]
    names = list(per)
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.barh(names, [per[k] for k in names], color=["#4c72b0" if k.startswith("standalone") else "#dd8452"
                                                   for k in names])
    ax.set_xlabel("seconds per submission (lower is better)")
    ax.set_title(f"{result['lab']}, {result['submissions']} submissions: nbgrader / standalone = "
                 f"{result['ratio_nbgrader_over_standalone']}x", fontsize=9)
    for i, k in enumerate(names):
        ax.text(per[k], i, f" {per[k]:.2f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
