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

# What to mutate per lab: the reference, or the course module it re-exports (whose
# functions ARE the reference there).
TARGETS = {
    "lab00": ["autograder.reference.lab00"],
    "lab01": ["autograder.reference.lab01"],
    "lab02": ["course.sampling"],
    "lab03": ["course.generation", "course.runs", "autograder.reference.lab03"],
    "lab04": ["autograder.reference.lab04"],
}
# Modules that bind names from a mutated module at import: executed again after each
# mutation so they (and the judges through them) see the mutant.
REBIND = {
    "lab02": ["autograder.reference.lab02"],
    "lab03": ["course.generation", "course.acceptance", "autograder.reference.lab03"],   # in import order
}
# In a course module only the functions the judges compute expected values with count;
# the rest of the module (e.g. course.generation's TextStream: lab03's stream judges use
# an independent oracle, reference.safe_emissions) is not what a hidden case checks.
SCOPE = {
    "course.generation": ("validate_params", "first_stop", "holdback_length", "_check_input_ids", "_steps",
                          "_start", "generate"),
    # course.runs is lab03's scaffolding; of it only the samplers compute what judges expect
    "course.runs": ("greedy_sampler", "seeded_sampler"),
    # lab02's judges take top-k/top-p from course.sampling and its argument checks (through
    # reference_rejects); the pipeline is judged against transformers' warpers and sampling
    # by chi-square against softmax, independent oracles, so those functions are out of scope
    "course.sampling": ("_is_number", "check_logits", "check_temperature", "check_top_k", "check_top_p",
                        "check_min_tokens_to_keep", "top_k_filter", "top_p_filter"),
}


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def grade_solution(lab: str, ns: dict) -> str | None:
    """Grade the solution namespace with every hidden case; the first failing case's name,
    or None when it earns full marks."""
    from .core import get_tests, run_test

    for name, test in get_tests(lab).items():
        failed = run_test(test, ns).first_failure()
        if failed is not None:
            return f"{name}/{failed.name}"
    return None


def _solution_ns(lab: str) -> dict:
    from .notebook import extract, namespace, read
    path = ROOT / "solutions" / lab / f"{lab}.ipynb"
    return namespace(extract(read(path)).code, str(path))


def _exec_into(module, source: str) -> None:
    exec(compile(source, module.__file__, "exec"), module.__dict__)


def _scope_lines(module, source: str) -> set[int] | None:
    """Line numbers of the top-level functions SCOPE names for `module` (None: all lines)."""
    import ast
    names = SCOPE.get(module.__name__)
    if names is None:
        return None
    lines = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            lines |= set(range(node.lineno, node.end_lineno + 1))
    return lines


def is_message_mutant(diff: list[str]) -> bool:
    """A mutation of string text only (mutmut's "XX...XX"), on a line that builds an error
    message or a parameter name shown in one: equivalent, since judges compare the
    student's messages, never the reference's."""
    before = [d[1:] for d in diff if d.startswith("-")]
    after = [d[1:] for d in diff if d.startswith("+")]
    if len(before) != 1 or len(after) != 1 or "XX" not in after[0]:
        return False
    text = before[0]
    return "raise " in text or "Error(" in text or text.lstrip().startswith(("f\"", "\"")) \
        or "check_" in text or "_number(" in text or "name" in text


def _mutants(module) -> list[tuple[int, str]]:
    """(line number, mutated source) for every mutant mutmut generates in `module`'s file
    (inside SCOPE, when the module has one)."""
    from mutmut import Context, list_mutations, mutate

    source = Path(module.__file__).read_text(encoding="utf-8")
    scope = _scope_lines(module, source)
    out = []
    for mid in list_mutations(Context(source=source, filename=module.__file__)):
        mutated, n = mutate(Context(source=source, mutation_id=mid, filename=module.__file__))
        try:
            compile(mutated, module.__file__, "exec")
        except SyntaxError:  # mutmut can produce code that does not parse (e.g. `**` -> `*` in a dict)
            continue
        if n and (scope is None or mid.line_number + 1 in scope):
            out.append((mid.line_number + 1, mutated))
    return out


def _diff(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def run_lab(lab: str, *, log=print) -> dict:
    if lab not in TARGETS:
        raise ValueError(f"`lab` must be one of {', '.join(TARGETS)}, got {lab!r}.")
    modules = [importlib.import_module(name) for name in TARGETS[lab]]
    rebind = [importlib.import_module(name) for name in REBIND.get(lab, [])]
    originals = {m.__name__: Path(m.__file__).read_text(encoding="utf-8") for m in modules + rebind}
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
                for later in rebind:
                    if later is not target:
                        _exec_into(later, originals[later.__name__])  # re-bind names it imported
                signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
                try:
                    killed_by = grade_solution(lab, ns)
                except _Timeout:
                    killed_by = f"timeout ({TIMEOUT_S:g} s)"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    for m in modules + [r for r in rebind if r not in modules]:
                        _exec_into(m, originals[m.__name__])
                diff = _diff(originals[target.__name__], mutated)
                rows.append({"module": target.__name__, "line": line, "killed_by": killed_by, "diff": diff,
                             "equivalent": None if killed_by or not is_message_mutant(diff)
                             else "error-message text (judges never compare the reference's messages)"})
                log(f"  {target.__name__}:{line} {'killed by ' + killed_by if killed_by else 'SURVIVED'}")
    finally:
        signal.signal(signal.SIGALRM, previous)
        for m in modules + [r for r in rebind if r not in modules]:
            _exec_into(m, originals[m.__name__])
    killed = sum(1 for r in rows if r["killed_by"])
    equivalent = sum(1 for r in rows if r["equivalent"])
    counted = len(rows) - equivalent
    return {"lab": lab, "targets": TARGETS[lab], "mutants": len(rows), "killed": killed,
            "equivalent": equivalent, "survived": counted - killed,
            "score": round(killed / counted, 4) if counted else None,
            "raw_score": round(killed / len(rows), 4) if rows else None,
            "seconds": round(time.perf_counter() - start, 1),
            "survivors": [r for r in rows if not r["killed_by"] and not r["equivalent"]],
            "equivalents": [r for r in rows if r["equivalent"]], "mutants_detail": rows}


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
        print(f"{lab}: {report['killed']} killed, {report['equivalent']} equivalent, {report['survived']} survived "
              f"of {report['mutants']} ({100 * (report['score'] or 0):.1f}% of the non-equivalent), "
              f"{report['seconds']:.0f} s", flush=True)
    print("\n| lab | mutants | killed | equivalent (message text) | survived | score | raw score |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['lab']} | {r['mutants']} | {r['killed']} | {r['equivalent']} | {r['survived']} | "
              f"{100 * (r['score'] or 0):.1f}% | {100 * (r['raw_score'] or 0):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
