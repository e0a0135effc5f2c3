"""Grade a class: find the submissions, grade them in parallel, resume after a crash.

    entries = discover([Path("submitted/")], "lab01", roster=None)
    summary = grade_batch(entries, "lab01", Path("grades/lab01"), workers=4)

Student ids come from the path: DIR/<student>/lab01.ipynb (also nbgrader's
submitted/<student>/lab01/lab01.ipynb) or DIR/<student>.ipynb; a roster CSV (columns
`file` and `student_id`, or the first two columns) overrides that.

Resuming, and which records are trusted: each student's JSON record is written last and
atomically, and it holds the submission's sha256, the grader version
(reports.grader_version) and a MAC (HMAC-SHA256) keyed by a secret made afresh for each
batch. While a batch runs, that key is kept in its journal, OUT/.batch.json (mode 0600),
and a batch that finishes deletes the journal: no key outlives a finished batch, so
nothing that runs later as the same user (a notebook executed by `nbgrader autograde`, say)
can sign a record this grader would keep. A batch that dies (killed, out of memory, ^C)
leaves its journal; a run asked to resume it (`resume=True`, `grade --resume`) takes over
its key and skips the students it finished. Without that request a journal found in OUT is
set aside (renamed, never read) and everyone is graded: code running as the grader's user
can write a journal too, with a key of its own and records signed with it, so only the
instructor, who knows a batch just died, can say a journal is one.
So a run trusts only the records written by itself or by the unfinished run it resumes: it
skips a student whose such record matches the file on disk, regrades one whose notebook
changed, whose MAC is missing or wrong (a record anyone else wrote, or a finished batch's),
or whose last grading hit a grader error, and regrades students graded by an older grader
version only with `force=True` (they are counted as `stale` otherwise, and the CLI says
so). The class CSV is rebuilt from the trusted records at the end of every run, so a killed
run never loses or duplicates a row.
"""
from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import reports
from .core import get_tests
from .isolation import Limits, Runtime, Sandbox, grade_isolated, prepare
from .isolation.sandbox import WeakIsolation  # noqa: F401  (raised by grade_batch)

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", ".git", "feedback", "autograded", "release"}


class BatchError(ValueError):
    """The batch cannot start (a path or the roster is wrong); the message says why."""


@dataclass
class Entry:
    student: str
    path: Path


@dataclass
class Summary:
    lab: str
    out: Path
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    grader_version: str = ""
    review: dict[str, list[str]] = field(default_factory=dict)    # student -> reasons (records of this batch)

    def line(self) -> str:
        s = (f"{self.lab}: graded {len(self.graded)}, up to date {len(self.skipped)}, "
             f"grader errors {len(self.errors)} in {self.seconds:.1f} s -> {self.out}")
        if self.stale:
            s += (f"\n{len(self.stale)} student(s) were graded by an older grader version and kept; "
                  "rerun with --force to regrade them.")
        if self.review:
            s += (f"\n{len(self.review)} student(s) to review by hand (their code walks frames or reaches into "
                  "other objects' state; scores unchanged; the `review` column of grades.csv says where): "
                  + ", ".join(sorted(self.review)))
        return s


# ---------------------------------------------------------------- finding submissions

def _notebooks(folder: Path) -> list[Path]:
    out = []
    for p in sorted(folder.rglob("*.ipynb")):
        rel = p.relative_to(folder).parts
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel[:-1]) or p.name.startswith("."):
            continue
        out.append(p)
    return out


def student_of(path: Path, lab: str, base: Path | None = None) -> str:
    """The student id a path implies: the stem of DIR/<student>.ipynb, the folder of
    DIR/<student>/labNN.ipynb, or the folder above the lab folder (nbgrader layout
    submitted/<student>/labNN/labNN.ipynb)."""
    path = Path(path)
    if base is not None and Path(base) in path.parents:
        folders = list(path.relative_to(base).parts[:-1])
        anchor = Path(base)
    else:
        folders, anchor = [], path.parent
    while folders and folders[-1] == lab:
        folders.pop()
    if folders:
        return folders[0]
    if path.stem == lab or re.fullmatch(r"lab\d\d", path.stem):
        while anchor.name == lab and anchor.parent != anchor:
            anchor = anchor.parent
        return anchor.name or path.stem
    return path.stem


def _read_roster(roster: Path) -> dict[str, str]:
    try:
        text = Path(roster).read_text(encoding="utf-8-sig")
    except OSError as e:
        raise BatchError(f"`--roster` {str(roster)!r} cannot be read ({e.strerror}).") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise BatchError(f"`--roster` {str(roster)!r} is empty.")
    head = [h.strip().lower() for h in rows[0]]
    fcol = next((i for i, h in enumerate(head) if h in ("file", "path", "filename", "notebook")), None)
    scol = next((i for i, h in enumerate(head) if h in ("student_id", "student", "id", "sid", "email")), None)
    if fcol is None or scol is None:
        if len(head) < 2:
            raise BatchError("`--roster` needs two columns: file, student_id.")
        fcol, scol, body = 0, 1, rows
    else:
        body = rows[1:]
    out = {}
    for r in body:
        if len(r) > max(fcol, scol) and r[fcol].strip() and r[scol].strip():
            out[r[fcol].strip()] = r[scol].strip()
    return out


def discover(paths, lab: str, roster: Path | None = None) -> list[Entry]:
    """Every submission under `paths` (files or folders), each with a student id."""
    found: list[tuple[Path, Path | None]] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            nbs = _notebooks(p)
            if not nbs:
                raise BatchError(f"no .ipynb files under {str(p)!r}.")
            found += [(n, p) for n in nbs]
        elif p.is_file():
            found.append((p, None))
        else:
            raise BatchError(f"`SUBMISSION` {str(p)!r} does not exist.")
    names = _read_roster(roster) if roster else None
    entries: dict[str, Entry] = {}
    clashes: dict[str, list[Path]] = {}
    for nb, base in found:
        if names is not None:
            sid = None
            for key in (str(nb), str(nb.resolve()), nb.name, str(nb.relative_to(base)) if base else nb.name):
                if key in names:
                    sid = names[key]
                    break
            if sid is None:
                raise BatchError(f"{nb} is not in the roster {roster}.")
        else:
            sid = student_of(nb, lab, base)
        if sid in entries:
            # two notebooks for one student: the one named after the lab wins, otherwise it is ambiguous
            old = entries[sid]
            if old.path.stem == lab and nb.stem != lab:
                continue
            if nb.stem == lab and old.path.stem != lab:
                entries[sid] = Entry(sid, nb)
                continue
            clashes.setdefault(sid, [old.path]).append(nb)
            continue
        entries[sid] = Entry(sid, nb)
    if clashes:
        lines = [f"  {sid}: {', '.join(map(str, ps))}" for sid, ps in sorted(clashes.items())]
        raise BatchError("several notebooks for the same student (name one per student, or pass --roster):\n"
                         + "\n".join(lines))
    return sorted(entries.values(), key=lambda e: e.student)


# ---------------------------------------------------------------- grading

def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


JOURNAL = ".batch.json"


def open_journal(out: Path, lab: str, resume: bool = False) -> tuple[bytes, bool]:
    """This batch's record key, and whether it resumes a batch that died: with `resume`, the
    key of the journal OUT/.batch.json a dead batch of the same lab left; otherwise (or when
    there is none) a new key, written there (mode 0600) before any record is. A journal not
    resumed is renamed .batch.json.set-aside-<time> and never read."""
    path = Path(out) / JOURNAL
    if resume:
        try:
            j = json.loads(path.read_text(encoding="utf-8"))
            key = bytes.fromhex(j["key"]) if j.get("lab") == lab else b""
            if len(key) >= 32:
                return key, True
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    if path.exists() or path.is_symlink():
        aside = path.with_name(f"{JOURNAL}.set-aside-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}")
        os.replace(path, aside)
        print(f"a journal {JOURNAL} was in {out}; not resuming it (grade --resume continues a batch that died), "
              f"so it is set aside as {aside.name} and every student is graded", file=sys.stderr)
    import secrets
    key = secrets.token_bytes(32)
    tmp = path.with_name(f".{JOURNAL}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"lab": lab, "key": key.hex(), "started_by_pid": os.getpid(),
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return key, False


def close_journal(out: Path) -> None:
    """The batch finished: its key goes, and with it every way to sign a record it would keep."""
    try:
        (Path(out) / JOURNAL).unlink()
    except FileNotFoundError:
        pass


def record_mac(rec: dict, key: bytes) -> str:
    body = {k: v for k, v in rec.items() if k != "mac"}
    return hmac.new(key, json.dumps(body, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def signed(rec: dict, key: bytes) -> bool:
    mac = rec.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(mac, record_mac(rec, key))


def _decide(entry: Entry, old: dict | None, version: str, force: bool, key: bytes = b"") -> str:
    """'grade', 'skip' or 'stale' for one student, given the record on disk."""
    if old is None or force or not signed(old, key):
        return "grade"
    if old.get("status") == "grader_error" or old.get("submission_sha256") != _sha256(entry.path):
        return "grade"
    if old.get("grader_version") != version:
        return "stale"
    return "skip"


def grade_batch(entries: list[Entry], lab: str, out: Path, *, workers: int | None = None, force: bool = False,
                limits: Limits | None = None, sandbox: str = "auto", progress: bool = True,
                hidden_visibility: str = "after_published", visible_only: bool = False,
                on_record=None, allow_weak: bool = False, lang: str | None = None, resume: bool = False) -> Summary:
    """Grade `entries` into `out` (students/, feedback/, gradescope/, grades.csv, summary.json).
    Raises WeakIsolation when the OS sandbox is missing and `allow_weak` is False.

    `resume` continues the batch that died in `out` (its journal): see the module docstring.

    The feedback of each student is in the language of the edition they submitted (their
    notebook's metadata "language", kept in the record as "language"); `lang` writes every
    student's feedback in that language instead, rewriting it from the record for students
    who are up to date (no regrading). The record and the points are the same either way."""
    t0 = time.monotonic()
    from . import kept
    kept.verify(lab=lab)                 # the expected values and inputs are the committed ones, or nobody is graded
    box = Sandbox.detect(sandbox)        # the one decision (isolation.sandbox.choose_tier), once per batch
    print(box.line(), file=sys.stderr)
    box.require(allow_weak)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tests = get_tests(lab)
    version = reports.grader_version(lab)
    limits = limits or Limits()
    workers = max(1, int(workers or os.cpu_count() or 1))
    summary = Summary(lab, out, grader_version=version)
    for stale_tmp in out.rglob(".*.tmp"):      # half-written files of a run that was killed
        try:
            stale_tmp.unlink()
        except OSError:
            pass
    key, resumed = open_journal(out, lab, resume)
    if resumed:
        print(f"resuming the unfinished batch in {out} (its journal {JOURNAL} is still there)", file=sys.stderr)
    existing = reports.load_records(out)
    todo = []
    for e in entries:
        verdict = _decide(e, existing.get(e.student), version, force, key)
        if verdict == "grade":
            todo.append(e)
        elif verdict == "stale":
            summary.stale.append(e.student)
        else:
            summary.skipped.append(e.student)
            if lang:   # the instructor asked for another language: rewrite the text, not the grade
                reports.write_student(out, existing[e.student], hidden_visibility=hidden_visibility, lang=lang)

    if todo:
        # the output folder and the folder holding all submissions (other students' work)
        parents = sorted({str(e.path.resolve().parent) for e in todo})
        hide = [str(out.resolve()), os.path.commonpath(parents)]
        runtime = Runtime(lab, sandbox=box, hide=tuple(hide))
        # When the lab's cases use the shipped tiny model: each worker's zygote loads it once
        # with the setup cells, so the child of every submission inherits it (loading it in
        # each child took lab07 about 4 s a submission), and the judges' copy loads here.
        from .selfcheck import warm_up
        warming = warm_up(lab, runtime, visible_only=visible_only)
        if warming is not None:
            warming.join()
        slots = threading.local()
        counter = iter(range(10_000))
        lock = threading.Lock()

        def work(entry: Entry) -> dict:
            if not hasattr(slots, "n"):
                with lock:
                    slots.n = next(counter)
            sub = prepare(entry.path, lab)
            graded = grade_isolated(sub, runtime, limits=limits, visible_only=visible_only, slot=slots.n)
            rec = reports.record(entry.student, sub, graded, version=version, limits=limits)
            rec["mac"] = record_mac(rec, key)
            reports.write_student(out, rec, hidden_visibility=hidden_visibility, lang=lang)
            return rec

        bar = None
        if progress:
            from tqdm import tqdm
            # the first notebook of each worker also starts its sandbox; the estimate settles after it
            bar = tqdm(total=len(todo), desc=f"grading {lab}", unit="nb", file=sys.stderr, dynamic_ncols=True,
                       bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                  "[{elapsed} elapsed, about {remaining} left, {rate_fmt}]")
        try:
            with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
                futures = {pool.submit(work, e): e for e in todo}
                for fut in as_completed(futures):
                    e = futures[fut]
                    try:
                        rec = fut.result()
                    except Exception as exc:  # a bug in the grader: record it, keep going
                        summary.errors.append(f"{e.student}: {type(exc).__name__}: {exc}")
                    else:
                        summary.graded.append(e.student)
                        if rec["status"] == "grader_error":
                            summary.errors.append(f"{e.student}: {rec['problems'][-1] if rec['problems'] else ''}")
                        if on_record:
                            on_record(rec)
                    if bar is not None:
                        bar.update(1)
        finally:
            if bar is not None:
                bar.close()
            runtime.close()

    records = reports.load_records(out)
    wanted = {e.student for e in entries}
    rows = [r for s, r in records.items() if (s in wanted or not entries) and signed(r, key)]
    reports.write_atomic(out / "grades.csv", reports.class_csv(rows, list(tests)))
    summary.review = {r["student"]: list(r["review"]) for r in rows if r.get("review")}
    summary.seconds = round(time.monotonic() - t0, 2)
    reports.write_atomic(out / "summary.json", json.dumps({
        "lab": lab, "grader_version": version, "students": len(rows),
        "mean_score": round(sum(r["score"] for r in rows) / len(rows), 4) if rows else None,
        "max_score": sum(t.points for t in tests.values()),
        "graded_now": len(summary.graded), "up_to_date": len(summary.skipped), "stale": summary.stale,
        "errors": summary.errors, "seconds": summary.seconds, "review": summary.review,
    }, indent=1) + "\n")
    close_journal(out)
    return summary
