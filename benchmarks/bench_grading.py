"""Grading speed: the standalone grader vs `nbgrader autograde`, same 50 submissions.

    .venv/bin/python benchmarks/bench_grading.py [--lab lab00] [--n 50] [--workers N] [--no-serial]

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
    ap.add_argument("--lab", default="lab00")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-serial", action="store_true", help="skip the one-worker standalone run")
    args = ap.parse_args(argv)
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
        print("nbgrader autograde ...", file=sys.stderr)
        t0 = time.perf_counter()
        nb_scores = nbgrader_autograde(args.lab, {s: p for s, (_, p) in subs.items()}, tmp / "nbgrader")
        runs["nbgrader"] = (time.perf_counter() - t0, {s: sum(v.values()) for s, v in nb_scores.items()})

    n = len(subs)
    per = {k: v[0] / n for k, v in runs.items()}
    mine = runs["standalone"][1]
    theirs = runs["nbgrader"][1]
    differ = sorted({(subs[s][0], mine.get(s), theirs.get(s)) for s in subs if mine.get(s) != theirs.get(s)})
    kinds = {}
    for s, (kind, _) in subs.items():
        kinds.setdefault(kind, 0)
        kinds[kind] += 1
    result = {
        "lab": args.lab, "submissions": n, "mix": kinds, "workers": args.workers,
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

    print(f"\nGrading {n} {args.lab} submissions ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))})")
    print(f"{'harness':<28}{'total s':>10}{'s / submission':>16}")
    for k in runs:
        print(f"{k:<28}{runs[k][0]:>10.1f}{per[k]:>16.2f}")
    print(f"nbgrader / standalone: {result['ratio_nbgrader_over_standalone']}x"
          + (f"  (vs 1 worker: {result['ratio_nbgrader_over_standalone_1_worker']}x)"
             if result["ratio_nbgrader_over_standalone_1_worker"] else ""))
    if differ:
        print("scores that differ (standalone vs nbgrader):")
        for d in result["score_differences"]:
            print(f"  {d['kind']:<32} standalone {d['standalone']:g}  nbgrader {d['nbgrader']:g}")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
