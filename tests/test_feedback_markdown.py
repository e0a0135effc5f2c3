"""feedback.md shows what the student's code said exactly as the JSON record holds it."""
import html
import re

import pytest

from autograder import reports
from autograder.core import CaseResult, describe
from autograder.core import TestResult as Result

markdown_it = pytest.importorskip("markdown_it")

RAISED = {"__raised__": "ValueError", "message": "`values` must be in [0, 1], got ``1.5`` *or* <b>x</b> & a_b_"}
GOT_TEXT = "`tick`"
MULTILINE = {"__raised__": "RuntimeError", "message": "first line\n# not a heading\n- not a list"}


def _record(got, message, lang=None):
    case = CaseResult("case_a", 0.0, 1.0, False, True, "fixture_a", message, [1, 2], got, "Read the contract.")
    r = Result("lab01", "softmax_is_stable", "softmax over the last dim: stable, +-inf rules, NaN rejected")
    r.cases = [case]
    return {"lab": "lab01", "student": "s1", "score": 0.0, "max_score": 1.0, "problems": [],
            "tests": [r.to_dict()], "language": lang}


def _rendered_items(md: str) -> list[str]:
    """The text of every list item as a reader sees it (tags dropped, entities decoded)."""
    out = markdown_it.MarkdownIt("commonmark").render(md)
    items = re.findall(r"<li>(.*?)</li>", out, re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", i)).strip() for i in items]


@pytest.mark.parametrize("lang,got_label,happened_label", [("en", "got: ", "what happened: "),
                                                           ("zh", "实际：", "发生了什么：")])
@pytest.mark.parametrize("got", [RAISED, GOT_TEXT, "``", " padded "])
def test_got_line_renders_exactly_as_the_record(lang, got_label, happened_label, got):
    message = f"your code raised ValueError: {RAISED['message']}"
    rec = _record(got, message, lang)
    items = _rendered_items(reports.feedback_markdown(rec))
    got_items = [i for i in items if i.startswith(got_label)]
    assert got_items == [got_label + describe(rec["tests"][0]["cases"][0]["got"])]
    happened = [i for i in items if i.startswith(happened_label)]
    assert len(happened) == 1 and happened[0].endswith(RAISED["message"])


def test_backticks_are_not_turned_into_quotes():
    md = reports.feedback_markdown(_record(RAISED, "raised ValueError"))
    assert "``'values' must" not in md and "`values` must be in [0, 1]" in md


def test_a_value_over_several_lines_stays_inside_its_list_item():
    md = reports.feedback_markdown(_record(MULTILINE, "raised RuntimeError"))
    out = markdown_it.MarkdownIt("commonmark").render(md)
    assert "<h1>not a heading" not in out and "<li>not a list" not in out
    code = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", out, re.DOTALL)
    assert describe(MULTILINE) + "\n" in [html.unescape(c) for c in code]


@pytest.mark.parametrize("text", ["plain", "`a`", "a ``b`` c", "```", " x ", "`", "a\\b*c*_d_[e](f)<g>&h|i~j"])
def test_code_span_and_markdown_text_round_trip(text):
    md = markdown_it.MarkdownIt("commonmark")
    span = md.renderInline(reports.code_span(text))
    assert html.unescape(re.sub(r"</?code>", "", span)) == text
    assert html.unescape(md.renderInline(reports.markdown_text(text))) == text
