"""Syllabus and glossary: assembled, in sync, one entry per lab, Chinese names present."""
import re

from course import docs
from notebooks import ROOT, lab_names

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_syllabus_and_glossary_are_in_sync():
    for name, text in docs.render().items():
        assert (ROOT / "course" / name).read_text(encoding="utf-8") == text, \
            f"course/{name} is stale: run `python -m course.docs`"


def test_every_lab_has_a_syllabus_entry_and_glossary():
    for lab in lab_names():
        assert (ROOT / "course" / "syllabus" / f"{lab}.md").is_file(), f"{lab} has no syllabus entry"
        assert (ROOT / "course" / "glossary" / f"{lab}.md").is_file(), f"{lab} has no glossary"
        assert (ROOT / "course" / "glossary" / f"{lab}.md").read_text(encoding="utf-8").count("|") > 8


def test_every_glossary_term_has_a_chinese_name():
    rows = docs.glossary_rows()
    assert len(rows) >= 5
    for term, zh, meaning, lab in rows:
        assert CJK.search(zh), f"{lab}: {term!r} has no Chinese name ({zh!r})"
        assert len(meaning) > 10, f"{lab}: {term!r} needs a meaning"
