"""The outcome table: every case's verdict on every kind of submission, from the standalone grader.

    python -m autograder.tests.outcomes            # rewrite autograder/tests/outcomes_baseline.json
    python -m autograder.tests.outcomes --check    # recompute; exit 1 and print the rows that changed
    python -m autograder.tests.outcomes lab00      # only some labs (a check compares only those)

A grader that changes its form (a module of `Test`s becoming a package of pytest tests)
must give the same verdicts. The table is {"labNN/submission": {"grade_id/case": [passed,
points]}}; the submissions of a lab are its bug_*/correct_* variants, the English and
Chinese release (`release`, `release_zh`) and solution (`solution`, `solution_zh`)
notebooks, and for lab00 every adversarial notebook (`adv_<name>`, graded with the
adversarial test's short limits). Adversarial files that only the OS sandbox stops
(`needs_os`) or that need a C compiler (`needs_cc`) are left out of a comparison on a
machine without them.

A variant's notebook must run: a bug_*/correct_* whose record reports a cell that raised
(or did not parse) would fail its cases for that, not for its bug, so compute() raises.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).resolve().parent / "outcomes_baseline.json"
LABS = ("lab00", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07")
VARIANTS = ROOT / "autograder" / "variants"
SECRET = "AUTOGRADER_TEST_SECRET"


def submissions(lab: str, folder: Path) -> dict[str, Path]:
    """name -> notebook for one lab's ordinary submissions (not the adversarial corpus)."""
    from autograder import editions
    from autograder.release import release_dir
    from autograder.tests.submissions import from_variant, solution, write

    out = {"release": sorted((ROOT / "labs" / lab).glob("*.ipynb"))[0], "solution": solution(lab)}
    if editions.translation_path(lab, "zh").is_file():
        out["release_zh"] = sorted(release_dir(lab, "zh").glob("*.ipynb"))[0]
        out["solution_zh"] = write(editions.edition(lab, "zh"), folder / "solution_zh.ipynb")
    for p in sorted(VARIANTS.joinpath(lab).glob("*.py")):
        if p.name.startswith(("bug_", "correct_")):
            out[p.stem] = write(from_variant(lab, p), folder / f"{p.stem}.ipynb")
    return out


def _grade(lab: str, named: dict[str, Path], work: Path, limits=None) -> dict[str, dict]:
    """Grade {name: notebook} in one standalone batch: {name: {"grade_id/case": [passed, points]}}."""
    import shutil

    from autograder.batch import Entry, grade_batch
    folder = work / "subs"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, path in named.items():
        dest = folder / f"{name}.ipynb"
        if Path(path).resolve() != dest.resolve():
            shutil.copy(path, dest)
        entries.append(Entry(name, dest))
    out = work / "grades"
    summary = grade_batch(entries, lab, out, workers=2, limits=limits, progress=False, force=True)
    if summary.errors:
        raise RuntimeError(f"{lab}: grader errors: {summary.errors}")
    table, broken = {}, []
    for name in named:
        rec = json.loads((out / "students" / f"{name}.json").read_text(encoding="utf-8"))
        if name.startswith(("bug_", "correct_")):
            broken += [f"{lab}/{name}: {p}" for p in rec.get("problems", []) if _cell_broke(p)]
        table[name] = {f"{t['name']}/{c['name']}": [bool(c["passed"]), float(c["points"])]
                       for t in rec["tests"] for c in t["cases"]}
    if broken:
        raise RuntimeError("a variant's notebook breaks in its own cells, so its verdicts are not its bug's "
                           "(see autograder/tests/submissions.py):\n" + "\n".join(broken))
    return table


def _cell_broke(problem: str) -> bool:
    """Whether a student record's problem says a cell failed to run (raised, did not parse,
    stopped the grading process) rather than something about the notebook's form."""
    return problem.startswith("cell `") or "setup cell" in problem


def _adversarial_skipped() -> set[str]:
    """Adversarial files this machine cannot judge the way the baseline's machine did."""
    from autograder.isolation import Sandbox
    from autograder.tests import adversarial
    weak = Sandbox.detect().weak
    cc = bool(adversarial.shared_library(Path(tempfile.mkdtemp(prefix="outcomes-cc-"))))
    out = set()
    for name, path in adversarial.sources().items():
        exp = adversarial.expectations(path)
        if (exp.get("needs_os") and weak) or (exp.get("needs_cc") and not cc):
            out.add(name)
    return out


def compute(labs=LABS) -> dict[str, dict]:
    """The outcome table of `labs` (minutes: every submission runs in the sandbox)."""
    from autograder.tests import adversarial
    from autograder.tests.test_adversarial import LIMITS
    table: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="outcomes-") as tmp:
        tmp = Path(tmp)
        for lab in labs:
            named = submissions(lab, tmp / lab / "built")
            for name, row in _grade(lab, named, tmp / lab / "plain").items():
                table[f"{lab}/{name}"] = row
            if lab == "lab00":
                old = os.environ.get(SECRET)
                os.environ[SECRET] = "hunter2-do-not-leak"
                try:
                    built = adversarial.build(tmp / lab / "adv-built")
                    skipped = _adversarial_skipped()
                    named = {f"adv_{n}": p for n, p in built.items() if n not in skipped}
                    for name, row in _grade(lab, named, tmp / lab / "adv", limits=LIMITS).items():
                        table[f"{lab}/{name}"] = row
                finally:
                    if old is None:
                        os.environ.pop(SECRET, None)
                    else:
                        os.environ[SECRET] = old
    return dict(sorted(table.items()))


def load() -> dict[str, dict]:
    return json.loads(BASELINE.read_text(encoding="utf-8"))


def dumps(table: dict) -> str:
    """One line per submission, so a diff names the submission that changed."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(table.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def differences(expected: dict, got: dict, labs=LABS) -> list[str]:
    """What changed between two tables, for the submissions of `labs` that both could grade."""
    out = []
    skipped = {f"lab00/adv_{n}" for n in _adversarial_skipped()}
    for key in sorted(set(expected) | set(got)):
        if key.split("/")[0] not in labs or key in skipped:
            continue
        a, b = expected.get(key), got.get(key)
        if a is None or b is None:
            out.append(f"{key}: {'new' if a is None else 'missing'}")
            continue
        for case in sorted(set(a) | set(b)):
            if a.get(case) != b.get(case):
                out.append(f"{key} {case}: baseline {a.get(case)}, now {b.get(case)}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.tests.outcomes", description=__doc__.split("\n\n")[0])
    ap.add_argument("labs", nargs="*", default=list(LABS))
    ap.add_argument("--check", action="store_true", help="compare with the baseline instead of writing it")
    args = ap.parse_args(argv)
    labs = tuple(args.labs)
    got = compute(labs)
    if args.check:
        diff = differences(load(), got, labs)
        print("\n".join(diff) if diff else f"outcomes of {', '.join(labs)} are unchanged")
        return 1 if diff else 0
    table = load() if BASELINE.is_file() else {}
    table = {k: v for k, v in table.items() if k.split("/")[0] not in labs} | got
    BASELINE.write_text(dumps(table), encoding="utf-8")
    print(f"wrote {len(got)} submissions of {', '.join(labs)} to {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
