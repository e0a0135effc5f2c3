"""Mutation score of the graders: how many small bugs planted in a lab's reference the
hidden cases notice.

    python -m autograder.mutation lab04 [lab01 ...]      (or: make mutation LAB=lab04)

mutmut (2.x) generates the mutants: one small change each (an operator, a constant, a
comparison, `and`/`or`, a return value) in the file that computes the judges' expected
values (autograder/reference/labNN.py, plus the course module a reference re-exports:
see TARGETS). The graders are the test command: for each mutant, the lab's solution
notebook is graded by every hidden case, and the mutant is *killed* when any case fails
(the judges then expect something the correct solution does not do), or when grading
runs past TIMEOUT_S (a planted endless loop). A surviving mutant is a behaviour no case
pins down, or an equivalent mutation; every survivor is listed with its diff for triage.

Lines marked `# pragma: no mutate` are skipped: the references' error messages, which no
judge compares (a judge checks the *student's* message; the reference only has to raise).

Mutants run in this process: the mutated source is executed into the module's own
namespace (so the graders, the loaded tiny model and torch are reused), and the original
is restored after each one. No file is written except the report:
benchmarks/results/mutation_labNN.json. Not part of `make test`: a lab takes minutes.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import json
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
TIMEOUT_S = 60.0

# What to mutate per lab, as (module, file): the reference, and the course module it
# re-exports (whose functions ARE the reference there). Re-exporting modules listed after.
TARGETS = {
    "lab00": ["autograder.reference.lab00"],
    "lab01": ["autograder.reference.lab01"],
    "lab02": ["course.sampling", "autograder.reference.lab02"],
    "lab03": ["course.generation", "autograder.reference.lab03"],
    "lab04": ["autograder.reference.lab04"],
}


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def grade_solution(lab: str, ns: dict) -> str | None:
    """Grade the solution namespace with every hidden case; the first failing case's name,
    or None when it earns full marks."""
    from .core import get_tests, run_case

    for name, test in get_tests(lab).items():
        for case in test.cases:
            if not run_case(case, ns).passed:
                return f"{name}/{case.name}"
    return None


def _solution_ns(lab: str) -> dict:
    from .notebook import extract, namespace, read
    path = ROOT / "solutions" / lab / f"{lab}.ipynb"
    return namespace(extract(read(path)).code, str(path))


def _exec_into(module, source: str) -> None:
    exec(compile(source, module.__file__, "exec"), module.__dict__)


def _mutants(module) -> list[tuple[int, str]]:
    """(line number, mutated source) for every mutant mutmut generates in `module`'s file."""
    from mutmut import Context, list_mutations, mutate

    source = Path(module.__file__).read_text(encoding="utf-8")
    out = []
    for mid in list_mutations(Context(source=source, filename=module.__file__)):
        mutated, n = mutate(Context(source=source, mutation_id=mid, filename=module.__file__))
        try:
            compile(mutated, module.__file__, "exec")
        except SyntaxError:  # mutmut can produce code that does not parse (e.g. `**` -> `*` in a dict)
            continue
        if n:
            out.append((mid.line_number + 1, mutated))
    return out


def _diff(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def run_lab(lab: str, *, log=print) -> dict:
    if lab not in TARGETS:
        raise ValueError(f"`lab` must be one of {', '.join(TARGETS)}, got {lab!r}.")
    modules = [importlib.import_module(name) for name in TARGETS[lab]]
    originals = {m.__name__: Path(m.__file__).read_text(encoding="utf-8") for m in modules}
    ns = _solution_ns(lab)
    baseline = grade_solution(lab, ns)
    if baseline is not None:
        raise RuntimeError(f"{lab}: the solution notebook fails {baseline} before any mutation")
    rows, start = [], time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for target in modules:
            for line, mutated in _mutants(target):
                _exec_into(target, mutated)
                for later in modules[modules.index(target) + 1:]:
                    _exec_into(later, originals[later.__name__])  # re-bind names it imported
                signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
                try:
                    killed_by = grade_solution(lab, ns)
                except _Timeout:
                    killed_by = f"timeout ({TIMEOUT_S:g} s)"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    for m in modules:
                        _exec_into(m, originals[m.__name__])
                rows.append({"module": target.__name__, "line": line, "killed_by": killed_by,
                             "diff": _diff(originals[target.__name__], mutated)})
                log(f"  {target.__name__}:{line} {'killed by ' + killed_by if killed_by else 'SURVIVED'}")
    finally:
        signal.signal(signal.SIGALRM, previous)
        for m in modules:
            _exec_into(m, originals[m.__name__])
    killed = sum(1 for r in rows if r["killed_by"])
    return {"lab": lab, "targets": TARGETS[lab], "mutants": len(rows), "killed": killed,
            "survived": len(rows) - killed, "score": round(killed / len(rows), 4) if rows else None,
            "seconds": round(time.perf_counter() - start, 1),
            "survivors": [r for r in rows if not r["killed_by"]], "mutants_detail": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Mutation score of the graders per lab (mutmut's mutants).")
    ap.add_argument("labs", nargs="*", default=sorted(TARGETS))
    ap.add_argument("--quiet", action="store_true", help="print only the summary")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for lab in args.labs:
        report = run_lab(lab, log=(lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True)))
        (OUT / f"mutation_{lab}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        rows.append(report)
        print(f"{lab}: {report['killed']}/{report['mutants']} killed ({100 * (report['score'] or 0):.1f}%), "
              f"{report['seconds']:.0f} s", flush=True)
    print("\n| lab | mutants | killed | survived | score |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['lab']} | {r['mutants']} | {r['killed']} | {r['survived']} | {100 * (r['score'] or 0):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
