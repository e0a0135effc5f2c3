"""Command line of the standalone grader.

    python -m autograder grade SUBMISSION_OR_FOLDER... --lab lab01 --out grades/lab01
    python -m autograder check labs/lab01/lab01.ipynb
    python -m autograder check labs/zh/lab01/lab01.ipynb      (report in Chinese: the edition's language)
    python -m autograder gradescope --lab lab01 --out gradescope/
    python -m autograder gradescope-run --lab lab01          (inside Gradescope's container)
    python -m autograder leaderboard --lab lab07 --grades grades/lab07   (ranked performance, table and PNG)
    python -m autograder times --lab lab07 --notebooks submitted       (minutes per exercise from cell timing)
    python -m autograder size --lab lab07                               (words to read, lines to write per exercise)

Feedback (feedback/*.md, Gradescope text, the `check` report) is written in the language of
the edition each student submitted (the notebook's metadata "language"; English when it has
none); `--lang en|zh` overrides it. Points never depend on it.

Exit status: 0 done; 1 `check` found failing visible cases; 2 bad arguments or an
unreadable roster/path; 3 some students hit a grader error (their records say so).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from .isolation import GiB, Limits   # (jsonschema's iri grammar is kept out by autograder/__init__.py)

LAB_RE = re.compile(r"lab\d\d")


def _limits(args) -> Limits:
    lim = Limits()
    for name in ("timeout", "test_timeout", "case_timeout", "cell_timeout"):
        v = getattr(args, name, None)
        if v is not None:
            if v <= 0:
                raise SystemExit(f"error: `--{name.replace('_', '-')}` must be > 0, got {v}.")
            setattr(lim, name, float(v))
    if getattr(args, "memory_gib", None) is not None:
        if args.memory_gib < 1:
            raise SystemExit(f"error: `--memory-gib` must be at least 1 (torch needs about 1 GiB), got {args.memory_gib}.")
        lim.memory = int(args.memory_gib * GiB)
    return lim


def _add_limits(p):
    g = p.add_argument_group("limits (per student)")
    g.add_argument("--timeout", type=float, help=f"seconds for the whole submission (default {Limits.timeout:g})")
    g.add_argument("--test-timeout", type=float, help=f"seconds for one test's cases (default {Limits.test_timeout:g})")
    g.add_argument("--case-timeout", type=float, help=f"seconds for one case (default {Limits.case_timeout:g})")
    g.add_argument("--cell-timeout", type=float, help=f"seconds for one notebook cell (default {Limits.cell_timeout:g})")
    g.add_argument("--memory-gib", type=float, help=f"address-space limit of the child in GiB (default {Limits.memory / GiB:g})")
    g.add_argument("--sandbox", choices=("auto", "python", "bubblewrap", "container"), default="auto",
                   help="auto: every child runs in a bubblewrap sandbox (namespaces, plus Landlock where "
                        "the kernel has it), or where namespaces are refused (a Docker container) in the "
                        "container tier (chroot, own uid, seccomp, rlimits; needs root); bubblewrap or "
                        "container: that tier only; python: Python-level protection only (not for credit)")
    g.add_argument("--allow-weak-isolation", action="store_true",
                   help="grade even when the OS sandbox is unavailable (submissions could then read other "
                        "students' work or the reference); without it the grader refuses")


def _labs() -> list[str]:
    """core.labs() without importing core (and torch): `check` prints its header first."""
    from .graders import labs
    return labs()


def _lab_of(path: str, given: str | None) -> str:
    labs = _labs
    if given:
        lab = given
    else:
        found = [m for part in reversed(Path(path).parts) for m in LAB_RE.findall(part)]
        if not found:
            raise SystemExit(f"error: cannot tell the lab from {path!r}; pass --lab labNN.")
        lab = found[0]
    if lab not in labs():
        raise SystemExit(f"error: `--lab` must be one of {', '.join(labs())}, got {lab!r}.")
    return lab


def cmd_grade(args) -> int:
    from .batch import BatchError, discover, grade_batch
    lab = _lab_of(args.submissions[0], args.lab)
    try:
        entries = discover([Path(p) for p in args.submissions], lab, Path(args.roster) if args.roster else None)
    except BatchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from .isolation import Sandbox, WeakIsolation
    from .kept import KeptFileChanged
    box = Sandbox.detect(args.sandbox)
    if box.weak:
        print(f"warning: no OS sandbox: {box.reason}", file=sys.stderr)
    try:
        summary = grade_batch(entries, lab, Path(args.out), workers=args.workers, force=args.force,
                              limits=_limits(args), sandbox=args.sandbox, progress=not args.quiet,
                              hidden_visibility=args.hidden_visibility, allow_weak=args.allow_weak_isolation,
                              lang=args.lang, resume=args.resume)
    except (WeakIsolation, KeptFileChanged) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary.line())
    for e in summary.errors:
        print(f"  grader error: {e}", file=sys.stderr)
    return 3 if summary.errors else 0


def cmd_check(args) -> int:
    from . import messages
    from .selfcheck import NotebookNotFound, estimate, heartbeat, remember_seconds, resolve_notebook, warm_up
    try:   # from work/, the course folder or anywhere: the error names every path looked at
        args.notebook = str(resolve_notebook(args.notebook))
    except NotebookNotFound as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    lab = _lab_of(args.notebook, args.lab)
    limits = _limits(args)
    # the report's language: --lang, else the notebook's edition (metadata "language"), else English
    lang = messages.language(args.lang or messages.notebook_language(args.notebook) or "en")
    started = time.monotonic()
    with heartbeat(messages.text("check.checking", lang, notebook=args.notebook, lab=lab,
                                 estimate=estimate(lab, lang))):
        from .isolation import Runtime, Sandbox, grade_isolated, prepare
        box = Sandbox.detect(args.sandbox)
        if box.weak:   # a self-check earns no credit: it runs anyway, and says so
            print(f"note: no OS sandbox ({box.reason}); fine for a self-check, not for grading.", file=sys.stderr)
        with Runtime(lab, sandbox=box) as rt:
            warming = warm_up(lab, rt)
            try:
                rt.zygote(0)                       # the sandbox starts now, while this process
            except OSError:                        # reads the notebook and loads the judges' model
                pass                               # (grade_isolated starts it again and reports why not)
            sub = prepare(args.notebook, lab)
            from . import reports                  # the judges' side: torch, the grader modules
            if warming is not None:
                warming.join()
            graded = grade_isolated(sub, rt, limits=limits, visible_only=True)
    if not graded.harness_error and not sub.fatal:
        remember_seconds(lab, time.monotonic() - started)
    rec = reports.record("you", sub, graded, version=reports.grader_version(lab), limits=limits)
    print(reports.check_text(rec, lang=lang))
    if graded.output.strip() and args.show_output:
        print("\n" + messages.text("check.printed", lang) + "\n" + graded.output)
    return 0 if all(c.passed for t in graded.tests for c in t.cases) and not sub.fatal else 1


def cmd_gradescope(args) -> int:
    from .gradescope import build_bundle
    from .core import labs
    if args.lab not in labs():
        raise SystemExit(f"error: `--lab` must be one of {', '.join(labs())}, got {args.lab!r}.")
    zpath = build_bundle(args.lab, Path(args.out), hidden_visibility=args.hidden_visibility)
    print(f"wrote {zpath}")
    return 0


def cmd_gradescope_run(args) -> int:
    from .gradescope import run_in_container
    root = Path(args.root or os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    return run_in_container(args.lab, root, hidden_visibility=args.hidden_visibility, limits=_limits(args),
                            sandbox=args.sandbox, allow_weak=args.allow_weak_isolation)


def _add_lang(p, what):
    from .messages import languages
    p.add_argument("--lang", choices=languages(), default=None,
                   help=f"language of {what} (default: the language of the notebook's edition, "
                        "its metadata \"language\"; English without one); never changes points")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autograder",
                                description="Standalone grader: runs submissions in isolated child processes.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade one notebook or folders of them")
    g.add_argument("submissions", nargs="+", metavar="SUBMISSION_OR_FOLDER")
    g.add_argument("--lab", help="labNN (default: found in the first path)")
    g.add_argument("--out", required=True, help="output folder (students/, feedback/, gradescope/, grades.csv)")
    g.add_argument("--roster", help="CSV mapping files to student ids (columns file, student_id)")
    g.add_argument("--workers", type=int, default=None, help="parallel children (default: the core count)")
    g.add_argument("--force", action="store_true", help="regrade students already graded (e.g. after a grader change)")
    g.add_argument("--resume", action="store_true",
                   help="continue the batch that died in --out, skipping the students it finished (it trusts that "
                        "folder's journal: use it right after the batch died, before student code runs as you again)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument("--hidden-visibility", default="after_published",
                   choices=("hidden", "after_due_date", "after_published", "visible"),
                   help="Gradescope visibility of the hidden cases' entries")
    _add_lang(g, "every student's feedback.md and Gradescope text")
    _add_limits(g)
    g.set_defaults(func=cmd_grade)

    c = sub.add_parser("check", help="self-check a notebook with the visible cases")
    c.add_argument("notebook")
    c.add_argument("--lab", help="labNN (default: found in the path)")
    c.add_argument("--show-output", action="store_true", help="also print what the code printed")
    _add_lang(c, "the report")
    _add_limits(c)
    c.set_defaults(func=cmd_check)

    s = sub.add_parser("gradescope", help="build the Gradescope autograder zip")
    s.add_argument("--lab", required=True)
    s.add_argument("--out", required=True, help="folder for LAB-gradescope.zip")
    s.add_argument("--hidden-visibility", default="after_published",
                   choices=("hidden", "after_due_date", "after_published", "visible"))
    s.set_defaults(func=cmd_gradescope)

    from . import gradebook_sync, leaderboard, preflight, size, times
    preflight.add_parser(sub)
    gradebook_sync.add_parser(sub)
    leaderboard.add_parser(sub)
    times.add_parser(sub)
    size.add_parser(sub)

    r = sub.add_parser("gradescope-run", help="(inside Gradescope) grade /autograder/submission")
    r.add_argument("--lab", required=True)
    r.add_argument("--root", help="the /autograder folder (default: $AUTOGRADER_ROOT or /autograder)")
    r.add_argument("--hidden-visibility", default="after_published",
                   choices=("hidden", "after_due_date", "after_published", "visible"))
    _add_limits(r)
    r.set_defaults(func=cmd_gradescope_run)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "workers", None) is not None and args.workers < 1:
        print(f"error: `--workers` must be at least 1, got {args.workers}.", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 2
        raise
