"""What the standalone grader writes: per-student JSON, Markdown feedback, Gradescope
results.json, the class CSV, and the terminal report of `check`.

Every writer works from the student *record* (the JSON), so a resumed batch can rebuild
the class CSV from the records on disk alone. Files are written atomically (a temporary
file in the same folder, then os.replace): a killed run leaves either the old file or the
new one, never half of one.
"""
from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path

from .core import CaseResult, TestResult, describe

SCHEMA = 1
ROOT = Path(__file__).resolve().parent.parent
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


# ---------------------------------------------------------------- text reports (every harness)

def case_line(c) -> str:
    """One case as the learner reads it: PASS/FAIL, points, and for a failure the
    message, expected vs got, and the hint."""
    mark = "PASS" if c.passed else "FAIL"
    where = f" [fixture {c.fixture}]" if c.fixture else ""
    head = f"  {mark} {c.name}{where} ({c.points:g}/{c.max_points:g})"
    if c.passed:
        return head
    lines = [head, f"       {c.message}"]
    if c.expected is not None or c.got is not None:
        lines.append(f"       expected: {describe(c.expected)}")
        lines.append(f"       got:      {describe(c.got)}")
    if c.hint:
        lines.append(f"       hint: {c.hint}")
    return "\n".join(lines)


def test_text(r: TestResult, *, title: str | None = None) -> str:
    """A whole test's report: a title line with the score, then one line per case."""
    head = title or f"{r.lab} / {r.name}: {r.score:g} of {r.max_score:g} points"
    return "\n".join([head] + [case_line(c) for c in r.cases])


# ---------------------------------------------------------------- versions and files

def grader_version(lab: str, root: Path | None = None) -> str:
    """A hash of everything that decides a grade for `lab`: the grader and reference
    modules (and shared helpers next to them), the core and the harness, the course
    library, the fixtures and the release notebook (its locked setup cells run first)."""
    root = Path(root or ROOT)
    ag = root / "autograder"
    files = [ag / "core.py", ag / "checks.py", ag / "toy_models.py", ag / "isolation.py", ag / "notebook.py",
             ag / "graders" / f"{lab}.py", ag / "reference" / f"{lab}.py"]
    for sub in ("graders", "reference"):
        files += [p for p in (ag / sub).glob("*.py") if not re.fullmatch(r"lab\d\d", p.stem)]
    files += sorted((root / "course").rglob("*.py"))
    files += sorted((root / "datasets" / "fixtures").glob("*.json"))
    files += sorted((root / "labs" / lab).glob("*.ipynb"))
    h = hashlib.sha256()
    for p in sorted(set(files)):
        if p.is_file() and "__pycache__" not in p.parts and "nbgrader" not in p.relative_to(root).parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def write_atomic(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def safe_name(student: str) -> str:
    """A file name for a student id (ids with odd characters get a short hash suffix)."""
    clean = re.sub(r"[^A-Za-z0-9._@+-]", "_", student).strip("._") or "student"
    if clean != student:
        clean += "-" + hashlib.sha256(student.encode()).hexdigest()[:8]
    return clean[:120]


# ---------------------------------------------------------------- the record

def record(student: str, sub, graded, *, version: str, limits=None) -> dict:
    """The per-student JSON: everything the other reports are made from."""
    if sub.fatal:
        status = "unreadable"
    elif graded.harness_error:
        status = "grader_error"
    else:
        status = "graded"
    return {
        "schema": SCHEMA, "harness": "standalone", "student": student, "lab": graded.lab,
        "file": str(sub.path), "submission_sha256": sub.sha256, "grader_version": version,
        "graded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "status": status, "score": graded.score, "max_score": graded.max_score,
        "problems": list(graded.problems), "tests": [t.to_dict() for t in graded.tests],
        "output_tail": graded.output, "restarts": graded.restarts, "seconds": graded.seconds,
        "sandbox": graded.sandbox, "limits": limits.to_dict() if limits is not None else None,
    }


def tests_of(rec: dict) -> list[TestResult]:
    out = []
    for t in rec.get("tests", []):
        r = TestResult(t["lab"], t["name"], t.get("description", ""))
        r.cases = [CaseResult(**c) for c in t.get("cases", [])]
        out.append(r)
    return out


# ---------------------------------------------------------------- Gradescope

def _entry(result: TestResult, cases, *, hidden: bool, number: str, visibility: str) -> dict:
    score = round(sum(c.points for c in cases), 4)
    max_score = round(sum(c.max_points for c in cases), 4)
    which = "hidden checks" if hidden else "checks"
    lines = [f"{result.description}", ""] + [case_line(c) for c in cases]
    return {"name": f"{result.name} ({which})", "number": number, "score": score, "max_score": max_score,
            "status": "passed" if all(c.passed for c in cases) else "failed",
            "output": "\n".join(lines), "visibility": visibility, "tags": [result.lab]}


def gradescope_results(rec: dict, *, hidden_visibility: str = "after_published") -> dict:
    """Gradescope's results.json: one entry for each Test's visible cases (shown at once)
    and one for its hidden cases (`hidden_visibility`, default after_published)."""
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"`hidden_visibility` must be one of {', '.join(VISIBILITIES)}, got {hidden_visibility!r}.")
    tests = []
    for i, r in enumerate(tests_of(rec), start=1):
        vis = [c for c in r.cases if c.visible]
        hid = [c for c in r.cases if not c.visible]
        if vis:
            tests.append(_entry(r, vis, hidden=False, number=f"{i}.1", visibility="visible"))
        if hid:
            tests.append(_entry(r, hid, hidden=True, number=f"{i}.2", visibility=hidden_visibility))
    head = [f"{rec['lab']}: {rec['score']:g} of {rec['max_score']:g} points"]
    if rec.get("problems"):
        head += ["", "Problems found while grading:"] + [f"- {p}" for p in rec["problems"]]
    return {
        "score": rec["score"],
        "execution_time": round(float(rec.get("seconds") or 0.0), 2),
        "output": "\n".join(head),
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"lab": rec["lab"], "max_score": rec["max_score"], "status": rec["status"],
                       "grader_version": rec["grader_version"]},
    }


GRADESCOPE_SCHEMA = {
    "type": "object",
    "required": ["tests"],
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": list(VISIBILITIES)},
        "stdout_visibility": {"enum": list(VISIBILITIES)},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "score", "max_score", "output", "visibility"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "number": {"type": "string"},
                "score": {"type": "number", "minimum": 0},
                "max_score": {"type": "number", "minimum": 0},
                "status": {"enum": ["passed", "failed"]},
                "output": {"type": "string"},
                "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
                "visibility": {"enum": list(VISIBILITIES)},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra_data": {"type": "object"},
            },
        }},
        "leaderboard": {"type": "array"},
    },
}


def validate_gradescope(results: dict) -> list[str]:
    """Problems with a results.json (empty when it follows Gradescope's format): the schema,
    each test's score within [0, max_score], and the total equal to the tests' sum."""
    import jsonschema
    errors = [e.message for e in jsonschema.Draft7Validator(GRADESCOPE_SCHEMA).iter_errors(results)]
    for t in results.get("tests", []) if isinstance(results.get("tests"), list) else []:
        if isinstance(t, dict) and isinstance(t.get("score"), (int, float)) and isinstance(t.get("max_score"), (int, float)):
            if t["score"] > t["max_score"] + 1e-9:
                errors.append(f"test {t.get('name')!r} scores {t['score']} > max_score {t['max_score']}")
    if "score" in results and isinstance(results.get("tests"), list):
        total = sum(t.get("score", 0) for t in results["tests"] if isinstance(t, dict))
        if abs(total - results["score"]) > 1e-6:
            errors.append(f"score {results['score']} != sum of test scores {total}")
    return errors


# ---------------------------------------------------------------- feedback

def _md(v) -> str:
    text = describe(v)
    return "`" + text.replace("`", "'") + "`"


def feedback_markdown(rec: dict) -> str:
    """Per-student feedback: the score, problems with the notebook, and for each test the
    first failing case with its fixture, expected vs got, and a hint."""
    out = [f"# {rec['lab']} feedback: {rec['student']}", "",
           f"**Score: {rec['score']:g} / {rec['max_score']:g}**", ""]
    if rec.get("problems"):
        out += ["Problems found while grading your notebook:", ""] + [f"- {p}" for p in rec["problems"]] + [""]
    for r in tests_of(rec):
        out += [f"## {r.name}: {r.score:g} / {r.max_score:g}", "", r.description, ""]
        c = r.first_failure()
        if c is None:
            out += [f"All {len(r.cases)} cases passed.", ""]
        else:
            where = f" on fixture `{c.fixture}`" if c.fixture else ""
            out += [f"First failing case: **`{c.name}`**{where}", "", f"- what happened: {c.message}"]
            if c.expected is not None or c.got is not None:
                out += [f"- expected: {_md(c.expected)}", f"- got: {_md(c.got)}"]
            if c.hint:
                out.append(f"- hint: {c.hint}")
            out.append("")
        out += ["| case | fixture | points | result |", "| --- | --- | --- | --- |"]
        for c in r.cases:
            mark = "pass" if c.passed else "FAIL"
            out.append(f"| {c.name} | {c.fixture or ''} | {c.points:g}/{c.max_points:g} | {mark} |")
        out.append("")
    tail = (rec.get("output_tail") or "").strip()
    if tail:
        out += ["## What your code printed (last lines; not used for grading)", "", "```text",
                tail[-2000:].replace("```", "'''"), "```", ""]
    return "\n".join(out)


def check_text(rec: dict) -> str:
    """The terminal report of `python -m autograder check` (visible cases only)."""
    out = []
    if rec.get("problems"):
        out += ["Problems with the notebook:"] + [f"  - {p}" for p in rec["problems"]] + [""]
    passed = total = 0
    for r in tests_of(rec):
        if not r.cases:
            out += [f"{r.name}: no visible checks (its hidden checks run when the lab is graded)", ""]
            continue
        out.append(test_text(r, title=f"{r.name}: visible checks"))
        ok = sum(c.passed for c in r.cases)
        passed += ok
        total += len(r.cases)
        verdict = "all passed" if ok == len(r.cases) else "keep going"
        out.append(f"{r.name}: {ok}/{len(r.cases)} visible checks passed ({verdict})")
        out.append("")
    out.append(f"{rec['lab']}: {passed}/{total} visible checks passed. Hidden checks run when the lab is graded.")
    return "\n".join(out)


# ---------------------------------------------------------------- writing

def student_paths(out: Path, student: str) -> dict[str, Path]:
    name = safe_name(student)
    out = Path(out)
    return {"json": out / "students" / f"{name}.json", "feedback": out / "feedback" / f"{name}.md",
            "gradescope": out / "gradescope" / name / "results.json"}


def write_student(out: Path, rec: dict, *, hidden_visibility: str = "after_published") -> dict[str, Path]:
    """Feedback and Gradescope results first, the JSON record last: the JSON is what marks
    a student as done when a batch resumes."""
    paths = student_paths(out, rec["student"])
    write_atomic(paths["feedback"], feedback_markdown(rec))
    write_atomic(paths["gradescope"], json.dumps(gradescope_results(rec, hidden_visibility=hidden_visibility),
                                                 indent=1) + "\n")
    write_atomic(paths["json"], json.dumps(rec, indent=1) + "\n")
    return paths


def load_records(out: Path) -> dict[str, dict]:
    """Every readable student record under out/students, by student id."""
    recs = {}
    for p in sorted((Path(out) / "students").glob("*.json")):
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA and "student" in rec:
            recs[rec["student"]] = rec
    return recs


def class_csv(records: list[dict], test_names: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student_id", "lab", "score", "max_score", "percent", *test_names, "status", "problems",
                "restarts", "seconds", "grader_version", "submission_sha256", "file"])
    for rec in sorted(records, key=lambda r: r["student"]):
        by = {t["name"]: t["score"] for t in rec.get("tests", [])}
        pct = 100.0 * rec["score"] / rec["max_score"] if rec.get("max_score") else 0.0
        w.writerow([rec["student"], rec["lab"], f"{rec['score']:g}", f"{rec['max_score']:g}", f"{pct:.1f}",
                    *[f"{by[n]:g}" if n in by else "" for n in test_names], rec["status"],
                    len(rec.get("problems", [])), rec.get("restarts", 0), rec.get("seconds", ""),
                    rec["grader_version"], rec.get("submission_sha256", ""), rec.get("file", "")])
    return buf.getvalue()
