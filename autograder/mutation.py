"""Mutation score of the graders: how many small bugs planted in a lab's reference
the hidden cases notice.

    python -m autograder.mutation lab04 [lab01 ...]      (or: make mutation LAB=lab04)

For each lab, mutmut (2.x) plants one mutation at a time in the file that computes the
judges' expected values (autograder/reference/labNN.py; for labs whose reference
re-exports a course module, that module too: see TARGETS) and runs the graders as the
test command: the lab's solution notebook is graded by every hidden case, and the mutant
is killed when any case fails (the judges then expect something the correct solution
does not do). A surviving mutant is a clause no case pins down, or an equivalent
mutation; each survivor is listed for triage.

mutmut rewrites the files it mutates, so every run works on a private copy of the
repository under a temporary folder (the shared checkout is never touched). Results:
benchmarks/results/mutation_labNN.json (killed, survived, score, survivors' diffs) and a
table on stdout. Not part of `make test`: a lab takes minutes.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"

# What to mutate per lab: the reference, and the course module it re-exports (if any).
TARGETS = {
    "lab00": ["autograder/reference/lab00.py"],
    "lab01": ["autograder/reference/lab01.py"],
    "lab02": ["autograder/reference/lab02.py", "course/sampling.py"],
    "lab03": ["autograder/reference/lab03.py", "course/generation.py"],
    "lab04": ["autograder/reference/lab04.py"],
}
COPY = ("autograder", "course", "datasets", "solutions", "labs", "nbgrader_config.py", "pyproject.toml")


def kill_check(lab: str) -> int:
    """The mutmut test command: 0 when the solution notebook earns full marks, 1 otherwise."""
    from .core import get_tests, run_test
    from .notebook import extract, namespace, read

    path = ROOT / "solutions" / lab / f"{lab}.ipynb"
    ns = namespace(extract(read(path)).code, str(path))
    failed = []
    for name, test in get_tests(lab).items():
        failed += [f"{name}/{c.name}" for c in run_test(test, ns).cases if not c.passed]
    if failed:
        print("killed by:", ", ".join(failed[:5]))
        return 1
    return 0


def _copy_repo(dest: Path) -> None:
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(
                "__pycache__", ".ipynb_checkpoints", "nbgrader", "results", "variants", "tests"))
        elif src.is_file():
            shutil.copy2(src, dest / name)


def _results(work: Path) -> dict:
    """Counts and survivor diffs from mutmut's cache, through its own CLI."""
    mutmut = [sys.executable, "-m", "mutmut"]
    text = subprocess.run(mutmut + ["results"], cwd=work, capture_output=True, text=True).stdout
    survivors = []
    section = None
    for line in text.splitlines():
        if line.startswith(("Survived", "Timed out", "Suspicious", "Killed", "Untested", "Skipped")):
            section = line.split(" ")[0]
        # "suspicious" mutants passed every case (only slowly): they survived too
        if section in ("Survived", "Suspicious", "Untested") and line[:1].isdigit():
            for a, b in re.findall(r"\b(\d+)(?:-(\d+))?\b", line):
                survivors += list(range(int(a), int(b or a) + 1))
    diffs = {}
    for i in survivors:
        diffs[i] = subprocess.run(mutmut + ["show", str(i)], cwd=work, capture_output=True, text=True).stdout
    return {"results": text, "survivors": diffs}


def run_lab(lab: str, *, keep: bool = False) -> dict:
    if lab not in TARGETS:
        raise ValueError(f"`lab` must be one of {', '.join(TARGETS)}, got {lab!r}.")
    work = Path(tempfile.mkdtemp(prefix=f"mutation-{lab}-"))
    try:
        _copy_repo(work)
        runner = f"{sys.executable} -m autograder.mutation --kill-check {lab}"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", ",".join(TARGETS[lab]),
                        "--tests-dir", "autograder/graders", "--runner", runner, "--no-progress",
                        "--simple-output"], cwd=work, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        out = _results(work)
        statuses = _statuses(work)
        total = sum(statuses.values())
        killed = statuses.get("ok_killed", 0) + statuses.get("bad_timeout", 0)  # a hang is caught too
        return {"lab": lab, "targets": TARGETS[lab], "mutants": total, "killed": killed,
                "survived": total - killed, "score": round(killed / total, 4) if total else None,
                "seconds": round(seconds, 1), "statuses": statuses, "survivors": out["survivors"],
                "mutmut_results": out["results"]}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _statuses(work: Path) -> dict[str, int]:
    """Mutants per mutmut status (ok_killed, bad_survived, bad_timeout, ...), from its cache."""
    import sqlite3
    cache = work / ".mutmut-cache"
    if not cache.is_file():
        return {}
    with sqlite3.connect(cache) as db:
        return {k: int(n) for k, n in db.execute("SELECT status, COUNT(*) FROM Mutant GROUP BY status")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Mutation score of the graders per lab (mutmut).")
    ap.add_argument("labs", nargs="*", default=sorted(TARGETS))
    ap.add_argument("--kill-check", metavar="LAB", help=argparse.SUPPRESS)
    ap.add_argument("--keep", action="store_true", help="keep the private copy (for `mutmut show`)")
    args = ap.parse_args(argv)
    if args.kill_check:
        return kill_check(args.kill_check)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for lab in args.labs:
        report = run_lab(lab, keep=args.keep)
        (OUT / f"mutation_{lab}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        rows.append(report)
        print(f"{lab}: {report['killed']}/{report['mutants']} killed "
              f"({100 * (report['score'] or 0):.1f}%), {report['seconds']:.0f} s", flush=True)
    print("\n| lab | mutants | killed | survived | score |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['lab']} | {r['mutants']} | {r['killed']} | {r['survived']} | "
              f"{100 * (r['score'] or 0):.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
