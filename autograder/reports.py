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
import functools
import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path

from . import messages
from .core import CaseResult, TestResult, describe

SCHEMA = 1
ROOT = Path(__file__).resolve().parent.parent
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


# ---------------------------------------------------------------- text reports (every harness)

def case_line(c, *, lang: str | None = None) -> str:
    """One case as the learner reads it: PASS/FAIL, points, and for a failure the
    message, expected vs got, and the hint. The fixed words and known sentences are in
    the language `lang` (see autograder.messages); the values are shown as they are."""
    t = functools.partial(messages.text, lang=lang)
    mark = t("case.pass") if c.passed else t("case.fail")
    where = f" [{t('case.fixture', fixture=c.fixture)}]" if c.fixture else ""
    head = f"  {mark} {c.name}{where} ({c.points:g}/{c.max_points:g})"
    if c.passed:
        return head
    lines = [head, f"       {messages.sentence(c.message, lang)}"]
    if c.expected is not None or c.got is not None:
        lines.append("       " + t("case.expected_line", value=describe(c.expected)))
        lines.append("       " + t("case.got_line", value=describe(c.got)))
    if c.hint:
        lines.append("       " + t("case.hint_line", hint=messages.sentence(c.hint, lang)))
    return "\n".join(lines)


def test_text(r: TestResult, *, title: str | None = None, lang: str | None = None) -> str:
    """A whole test's report: a title line with the score, then one line per case."""
    head = title or messages.text("test.title", lang, lab=r.lab, name=r.name, score=r.score, max_score=r.max_score)
    return "\n".join([head] + [case_line(c, lang=lang) for c in r.cases])


def language_of(rec: dict, lang: str | None = None) -> str:
    """The language a student's reports are written in: `lang` (an instructor's --lang),
    else the edition of the submitted notebook (its metadata "language"), else English.
    Never the grader's own environment: the same record gives the same text anywhere."""
    return messages.language(lang or rec.get("language") or "en")


# ---------------------------------------------------------------- versions and files

def grader_version(lab: str, root: Path | None = None) -> str:
    """A hash of everything that decides a grade for `lab`: the grader and reference
    modules (and shared helpers next to them), the core and the harness, the course
    library, the fixtures and the release notebook (its locked setup cells run first)."""
    root = Path(root or ROOT)
    ag = root / "autograder"
    files = [ag / "core.py", ag / "checks.py", ag / "toy_models.py", ag / "notebook.py", ag / "plugin.py",
             ag / "graders" / f"{lab}.py", ag / "reference" / f"{lab}.py"]
    files += sorted((ag / "graders" / lab).rglob("*.py"))          # a lab's graders as a pytest package
    files += sorted((ag / "isolation").glob("*.py"))
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

PREVIEW = 2048          # characters of an expected or a got value a record keeps
MESSAGE = 4000          # characters of a case's message or hint, or of one problem
PROBLEMS = 50           # problems a record lists (one per cell at most, in practice)


def preview(value, limit: int = PREVIEW):
    """`value` itself when its JSON fits in `limit` characters; otherwise the start of that
    JSON as a string, marked as cut, so one failing case never makes a record large."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)[:limit + 1]
        if len(text) <= limit:
            return text
        return f"{text[:limit]}... (cut at {limit} characters)"
    if len(text) <= limit:
        return value
    return f"{text[:limit]}... (cut: {len(text)} characters in all)"


def _bounded_case(c: dict) -> dict:
    c = dict(c)
    c["expected"], c["got"] = preview(c.get("expected")), preview(c.get("got"))
    for k in ("message", "hint"):
        if isinstance(c.get(k), str) and len(c[k]) > MESSAGE:
            c[k] = c[k][:MESSAGE] + "... (cut)"
    return c


def _bounded_test(t: dict) -> dict:
    return dict(t, cases=[_bounded_case(c) for c in t.get("cases", [])])


def _bounded_problems(problems: list) -> list[str]:
    """At most PROBLEMS of them, each cut to MESSAGE characters; the last one (a grader
    error is reported last) is always kept."""
    out = [str(p)[:MESSAGE] for p in problems]
    if len(out) > PROBLEMS:
        out = out[:PROBLEMS - 2] + [f"... {len(out) - PROBLEMS + 1} more problems ..."] + out[-1:]
    return out


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
        "problems": _bounded_problems(graded.problems),
        "tests": [_bounded_test(t.to_dict()) for t in graded.tests],
        "output_tail": graded.output, "restarts": graded.restarts, "seconds": graded.seconds,
        "sandbox": graded.sandbox, "limits": limits.to_dict() if limits is not None else None,
        # the edition the student worked in (notebook metadata "language"): the language the
        # feedback is written in; the record itself holds no translated text
        "language": messages.notebook_language(sub.path) if getattr(sub, "path", None) else None,
        # for the instructor, never in the student's feedback: cells that walk frames or reach
        # into other objects' state (preflight.review_of); the score does not depend on it
        "review": _review(sub, graded.tests),
    }


def _review(sub, tests=()) -> list[str]:
    """Reasons to look at the submission by hand: its cells' introspection (preflight.review_of),
    then each case whose judge flagged it (CaseResult.review, e.g. lab07's impossible workload log)."""
    from .preflight import review_of
    flagged = [f"case `{t.name}/{c.name}`: {c.review}" for t in tests for c in t.cases if getattr(c, "review", None)]
    return _bounded_problems(review_of(sub) + flagged)


def tests_of(rec: dict) -> list[TestResult]:
    out = []
    for t in rec.get("tests", []):
        r = TestResult(t["lab"], t["name"], t.get("description", ""))
        r.cases = [CaseResult(**c) for c in t.get("cases", [])]
        out.append(r)
    return out


# ---------------------------------------------------------------- Gradescope

def _entry(result: TestResult, cases, *, hidden: bool, number: str, visibility: str, lang: str = "en") -> dict:
    score = round(sum(c.points for c in cases), 4)
    max_score = round(sum(c.max_points for c in cases), 4)
    which = messages.text("gradescope.hidden_checks" if hidden else "gradescope.checks", lang)
    lines = [f"{messages.sentence(result.description, lang)}", ""] + [case_line(c, lang=lang) for c in cases]
    return {"name": f"{result.name} ({which})", "number": number, "score": score, "max_score": max_score,
            "status": "passed" if all(c.passed for c in cases) else "failed",
            "output": "\n".join(lines), "visibility": visibility, "tags": [result.lab]}


def gradescope_results(rec: dict, *, hidden_visibility: str = "after_published", lang: str | None = None) -> dict:
    """Gradescope's results.json: one entry for each Test's visible cases (shown at once)
    and one for its hidden cases (`hidden_visibility`, default after_published). Its text
    is in the student's edition's language (`lang` overrides; see language_of)."""
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"`hidden_visibility` must be one of {', '.join(VISIBILITIES)}, got {hidden_visibility!r}.")
    lang = language_of(rec, lang)
    tests = []
    for i, r in enumerate(tests_of(rec), start=1):
        vis = [c for c in r.cases if c.visible]
        hid = [c for c in r.cases if not c.visible]
        if vis:
            tests.append(_entry(r, vis, hidden=False, number=f"{i}.1", visibility="visible", lang=lang))
        if hid:
            tests.append(_entry(r, hid, hidden=True, number=f"{i}.2", visibility=hidden_visibility, lang=lang))
    head = [messages.text("gradescope.title", lang, lab=rec["lab"], score=rec["score"], max_score=rec["max_score"])]
    if rec.get("problems"):
        head += ["", messages.text("gradescope.problems", lang)] + \
            [f"- {messages.sentence(p, lang)}" for p in rec["problems"]]
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

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~])")


def code_span(text: str) -> str:
    """`text` as Markdown code that renders exactly as it is: a code span fenced with one
    backtick more than the longest run of backticks inside it (CommonMark), padded with a
    space where the text starts or ends with a backtick; text over several lines becomes
    a fenced code block, indented to stay inside a list item."""
    text = str(text)
    if "\n" in text or "\r" in text:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        fence = "`" * max(3, _longest_run(text, "`") + 1)
        return "\n\n" + "\n".join("  " + ln for ln in [fence + "text", *lines, fence])
    fence = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")
                                                                and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_text(text: str) -> str:
    """`text` as Markdown prose that renders exactly as it is (the characters that would
    start code, emphasis, links, HTML or tables are escaped); several lines become code."""
    text = str(text)
    if "\n" in text or "\r" in text:
        return code_span(text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def _longest_run(text: str, ch: str) -> int:
    runs = re.findall(f"{re.escape(ch)}+", text)
    return max((len(r) for r in runs), default=0)


def _md(v) -> str:
    """An expected or got value as code, exactly as the terminal report describes it."""
    return code_span(describe(v))


def feedback_markdown(rec: dict, *, lang: str | None = None) -> str:
    """Per-student feedback: the score, problems with the notebook, and for each test the
    first failing case with its fixture, expected vs got, and a hint. Written in the
    student's edition's language (`lang` overrides; see language_of)."""
    t = functools.partial(messages.text, lang=language_of(rec, lang))
    say = functools.partial(messages.sentence, lang=language_of(rec, lang))
    out = [t("feedback.title", lab=rec["lab"], student=rec["student"]), "",
           t("feedback.score", score=rec["score"], max_score=rec["max_score"]), ""]
    if rec.get("problems"):
        out += [t("feedback.problems"), ""] + [f"- {say(p)}" for p in rec["problems"]] + [""]
    for r in tests_of(rec):
        out += [t("feedback.test", name=r.name, score=r.score, max_score=r.max_score), "", say(r.description), ""]
        c = r.first_failure()
        if c is None:
            out += [t("feedback.all_passed", n=len(r.cases)), ""]
        else:
            where = t("feedback.on_fixture", fixture=c.fixture) if c.fixture else ""
            out += [t("feedback.first_failure", name=c.name, where=where), "",
                    t("feedback.what_happened", message=markdown_text(say(c.message)))]
            if c.expected is not None or c.got is not None:
                out += [t("feedback.expected", value=_md(c.expected)), t("feedback.got", value=_md(c.got))]
            if c.hint:
                out.append(t("feedback.hint", hint=say(c.hint)))
            out.append("")
        out += [t("feedback.table_head"), "| --- | --- | --- | --- |"]
        for c in r.cases:
            mark = t("feedback.pass") if c.passed else t("feedback.fail")
            out.append(f"| {c.name} | {c.fixture or ''} | {c.points:g}/{c.max_points:g} | {mark} |")
        out.append("")
    tail = (rec.get("output_tail") or "").strip()
    if tail:
        out += [t("feedback.printed"), "", "```text",
                tail[-2000:].replace("```", "'''"), "```", ""]
    return "\n".join(out)


def check_text(rec: dict, *, lang: str | None = None) -> str:
    """The terminal report of `python -m autograder check` (visible cases only), in the
    notebook's edition's language (`lang` overrides; see language_of)."""
    lang = language_of(rec, lang)
    t = functools.partial(messages.text, lang=lang)
    out = []
    if rec.get("problems"):
        out += [t("check.problems")] + [f"  - {messages.sentence(p, lang)}" for p in rec["problems"]] + [""]
    passed = total = 0
    for r in tests_of(rec):
        if not r.cases:
            out += [t("check.none", name=r.name), ""]
            continue
        out.append(test_text(r, title=t("test.visible_title", name=r.name), lang=lang))
        ok = sum(c.passed for c in r.cases)
        passed += ok
        total += len(r.cases)
        verdict = t("check.all_passed") if ok == len(r.cases) else t("check.keep_going")
        out.append(t("check.summary", name=r.name, passed=ok, total=len(r.cases), verdict=verdict))
        out.append("")
    out.append(t("check.lab_summary", lab=rec["lab"], passed=passed, total=total))
    return "\n".join(out)


# ---------------------------------------------------------------- writing

def student_paths(out: Path, student: str) -> dict[str, Path]:
    name = safe_name(student)
    out = Path(out)
    return {"json": out / "students" / f"{name}.json", "feedback": out / "feedback" / f"{name}.md",
            "gradescope": out / "gradescope" / name / "results.json"}


def write_student(out: Path, rec: dict, *, hidden_visibility: str = "after_published",
                  lang: str | None = None) -> dict[str, Path]:
    """Feedback and Gradescope results first, the JSON record last: the JSON is what marks
    a student as done when a batch resumes. `lang`: the feedback's language for every
    student (default: each student's edition)."""
    paths = student_paths(out, rec["student"])
    write_atomic(paths["feedback"], feedback_markdown(rec, lang=lang))
    write_atomic(paths["gradescope"], json.dumps(gradescope_results(rec, hidden_visibility=hidden_visibility,
                                                                    lang=lang), indent=1) + "\n")
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
    """The class table; when some record holds performance figures (lab07's performance cases,
    see autograder.leaderboard), one column per figure follows the usual ones."""
    from .leaderboard import FIGURES, figures
    perf = {rec["student"]: figures(rec) for rec in records}
    extra = list(FIGURES) if any(perf.values()) else []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student_id", "lab", "score", "max_score", "percent", *test_names, "status", "problems", "review",
                "restarts", "seconds", "grader_version", "submission_sha256", "file", *extra])
    for rec in sorted(records, key=lambda r: r["student"]):
        by = {t["name"]: t["score"] for t in rec.get("tests", [])}
        pct = 100.0 * rec["score"] / rec["max_score"] if rec.get("max_score") else 0.0
        f = perf[rec["student"]] or {}
        w.writerow([rec["student"], rec["lab"], f"{rec['score']:g}", f"{rec['max_score']:g}", f"{pct:.1f}",
                    *[f"{by[n]:g}" if n in by else "" for n in test_names], rec["status"],
                    len(rec.get("problems", [])), "; ".join(rec.get("review") or []), rec.get("restarts", 0), rec.get("seconds", ""),
                    rec["grader_version"], rec.get("submission_sha256", ""), rec.get("file", ""),
                    *[f"{f[k]:.6f}" if k in f else "" for k in extra]])
    return buf.getvalue()
