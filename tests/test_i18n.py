"""Language editions: complete and current translations, identical code, equal grades.

Each edition's release and solution are also graded by the real nbgrader, as the same
assignment, in the session's one nbgrader run (e2e/test_nbgrader_pipeline.py, `make e2e`): the release
runs to its end and scores 0, the solution runs top to bottom without an error and scores
what the English one does."""
import copy
import re
import string

import pytest

from autograder import core, editions, messages
from autograder.notebook import extract, namespace
from autograder.release import release_dir, release_to
from course import docs
from notebooks import lab_names, read

LANG = "zh"
# These labs must have a Chinese edition; any other lab must once it has a translation file.
REQUIRED = ["lab00", "lab01", "lab02", "lab03", "lab04"]
LABS = [lab for lab in lab_names() if lab in REQUIRED or editions.translation_path(lab, LANG).is_file()]
CJK = re.compile(r"[\u4e00-\u9fff]")


def source(lab):
    return read(editions.source_path(lab))


@pytest.mark.parametrize("lab", LABS)
def test_every_translatable_cell_has_a_current_translation(lab):
    found = editions.problems(source(lab), editions.load(lab, LANG), LANG)
    assert not found, f"{lab} ({LANG}): " + "; ".join(found) + \
        " -- see `python -m autograder.editions --help`"


def test_every_cell_has_a_stable_id():
    for lab in lab_names():
        ids = [c.get("id") for c in source(lab).cells]
        assert all(ids), f"{lab}: a cell without an nbformat 4.5 id"
        assert len(set(ids)) == len(ids), f"{lab}: duplicate cell ids"


def test_a_missing_or_stale_translation_is_named_by_cell_id():
    nb, data = source("lab00"), editions.load("lab00", LANG)
    assert editions.problems(nb, data, LANG) == []
    missing = copy.deepcopy(data)
    del missing["cells"]["look-at-a-fixture"]
    assert editions.problems(nb, missing, LANG) == ["cell 'look-at-a-fixture': no zh translation"]
    changed = copy.deepcopy(nb)
    next(c for c in changed.cells if c.id == "loop-intro").source += " One more English sentence."
    assert editions.problems(changed, data, LANG) == \
        ["cell 'loop-intro': stale zh translation (the English changed since it was translated)"]
    with pytest.raises(editions.TranslationError, match="'loop-intro'"):
        editions.translate(changed, data, LANG)
    stub = next(c for c in changed.cells if c.id == "greedy-token")
    stub.source = stub.source.replace("Ties go to the lowest token id.", "Ties go to the highest token id.")
    assert "cell 'greedy-token': stale zh translation" in " ".join(editions.problems(changed, data, LANG))
    # Lenient mode (what `make release` uses) keeps the English of exactly those cells.
    lenient = editions.translate(changed, data, LANG, strict=False)
    by_id = {c.id: c for c in lenient.cells}
    assert by_id["loop-intro"].source.endswith("One more English sentence.")
    assert CJK.search(by_id["look-at-a-fixture"].source)


def _english_docstrings_back(cell, english_cell):
    """The cell's source with its docstrings replaced by those of `english_cell`."""
    src = cell.source
    spans, originals = editions.docstring_spans(src), editions.english(english_cell) or []
    if editions.kind_of(english_cell) != "docstrings":
        return src
    assert len(spans) == len(originals)
    for (a, b), text in reversed(list(zip(spans, originals))):
        src = src[:a] + text + src[b:]
    return src


def _assert_same_code(en, zh, where):
    assert [c.get("id") for c in en.cells] == [c.get("id") for c in zh.cells], f"{where}: cells differ"
    for a, b in zip(en.cells, zh.cells):
        assert a.cell_type == b.cell_type, f"{where}: cell {a.id} changed type"
        if editions.kind_of(a):   # translated text: nbgrader's checksum of the source differs, nothing else
            meta_a, meta_b = copy.deepcopy(a.metadata), copy.deepcopy(b.metadata)
            for meta in (meta_a, meta_b):
                meta.get("nbgrader", {}).pop("checksum", None)
            assert meta_a == meta_b, f"{where}: cell {a.id} metadata differs"
        else:
            assert a.metadata == b.metadata, f"{where}: cell {a.id} metadata differs (checksum included)"
        if a.cell_type != "code":
            continue
        if editions.kind_of(a) == "docstrings":
            assert _english_docstrings_back(b, a) == a.source, \
                f"{where}: solution cell {a.id} differs outside its docstrings"
        else:
            assert a.source == b.source, f"{where}: code cell {a.id} is not byte-identical"


@pytest.mark.parametrize("lab", LABS)
def test_code_and_graded_cells_are_identical_in_both_editions(lab):
    _assert_same_code(source(lab), editions.edition(lab, LANG), f"{lab} source")
    en, zh = read(release_dir(lab) / f"{lab}.ipynb"), read(release_dir(lab, LANG) / f"{lab}.ipynb")
    _assert_same_code(en, zh, f"{lab} release")
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type == "code":
            assert b.outputs == [] and b.execution_count is None
        if a.cell_type == "markdown" and CJK.search(a.source) is None and a.source.strip():
            assert CJK.search(b.source), f"{lab} release: markdown cell {a.id} is not translated"


@pytest.mark.slow
def test_chinese_release_matches_a_fresh_nbgrader_release(tmp_path):
    generated = release_to(LABS, tmp_path, LANG, strict=True)
    for lab in LABS:
        want = read(generated / lab / f"{lab}.ipynb")
        have = read(release_dir(lab, LANG) / f"{lab}.ipynb")
        assert [(c.cell_type, c.source, dict(c.metadata)) for c in have.cells] == \
            [(c.cell_type, c.source, dict(c.metadata)) for c in want.cells], \
            f"labs/{LANG}/{lab} differs from the nbgrader release: run `python -m autograder.release {lab}`"


def _graded(nb, lab):
    ns = namespace(extract(nb).code, f"<{lab}>")
    return {name: core.run_test(test, ns).score for name, test in core.get_tests(lab).items()}


def _submission(release_nb, filled_from, skip=()):
    """The release notebook with its solution cells taken from `filled_from` (except `skip`)."""
    nb = copy.deepcopy(release_nb)
    solutions = {c.id: c.source for c in filled_from.cells if editions.kind_of(c) or
                 (c.cell_type == "code" and (c.metadata.get("nbgrader") or {}).get("solution"))}
    for c in nb.cells:
        if c.id in solutions and c.id not in skip and (c.metadata.get("nbgrader") or {}).get("solution"):
            c.source = solutions[c.id]
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS)
def test_the_same_code_gets_the_same_points_in_either_edition(lab, one_thread):
    en_release = read(release_dir(lab) / f"{lab}.ipynb")
    zh_release = read(release_dir(lab, LANG) / f"{lab}.ipynb")
    en_src, zh_src = source(lab), editions.edition(lab, LANG)
    first = next(c.id for c in en_src.cells if (c.metadata.get("nbgrader") or {}).get("solution"))
    for skip in ((), (first,)):                       # full marks, and partial marks (one stub left)
        en = _graded(_submission(en_release, en_src, skip), lab)
        zh = _graded(_submission(zh_release, zh_src, skip), lab)
        assert en == zh, f"{lab}: the same code scores {en} in English and {zh} in Chinese"
    assert sum(en.values()) < sum(_graded(_submission(en_release, en_src), lab).values())


def _alternatives(term):
    alts = {term}
    m = re.match(r"^(.*?)\s*\((.*)\)\s*$", term)
    if m:
        alts |= {m[1], m[2]}
    for a in list(alts):
        alts |= set(a.split(" / "))
    return {a.strip() for a in alts if len(a.strip()) >= 2}


def _headword(zh):
    """The Chinese form a translation must use: the glossary's zh column up to its first bracket."""
    return re.split(r"[（(]", zh)[0].strip()


@pytest.mark.parametrize("lab", LABS)
def test_glossary_terms_used_in_a_lab_appear_in_chinese_in_its_chinese_edition(lab):
    english = "\n".join(c.source for c in source(lab).cells if c.cell_type == "markdown")
    chinese = "\n".join(c.source for c in editions.edition(lab, LANG).cells
                        if c.cell_type == "markdown" or editions.kind_of(c) == "docstrings")
    missing = []
    for term, zh, _, first_lab in docs.glossary_rows():
        if first_lab > lab:
            continue  # the word appears before the lab that defines the term, in another sense
        used = any(re.search(r"(?<![\w-])" + re.escape(a) + r"(?![\w-])", english, re.I) for a in _alternatives(term))
        if used and _headword(zh).lower() not in chinese.lower():
            missing.append(f"{term!r} -> {_headword(zh)!r}")
    assert not missing, f"{lab} ({LANG}) uses these glossary terms without their Chinese form: {missing}"


def test_message_catalogs_have_the_same_ids_and_placeholders():
    english = messages.catalog("en")["messages"]
    for lang in messages.languages():
        table = messages.catalog(lang).get("messages", {})
        assert set(table) <= set(english), f"{lang}.json has ids that en.json lacks: {set(table) - set(english)}"
        for msg_id, template in table.items():
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            want = {f for _, f, _, _ in string.Formatter().parse(english[msg_id]) if f}
            assert fields == want, f"{lang}.json {msg_id}: placeholders {fields} != {want}"
    assert set(messages.catalog(LANG)["messages"]) == set(english), "zh.json must translate every message"


def test_messages_follow_the_chosen_language(monkeypatch):
    monkeypatch.delenv(messages.LANG_ENV, raising=False)
    monkeypatch.delenv(messages.SESSION_ENV, raising=False)   # not inside a Jupyter-started kernel
    assert messages.text("case.expected") == "expected:"
    monkeypatch.setenv(messages.LANG_ENV, "zh")
    assert messages.text("case.expected") == "期望："
    assert messages.text("test.title", lab="lab01", name="softmax_is_stable", score=3, max_score=9) == \
        "lab01 / softmax_is_stable：3 / 9 分"
    assert messages.text("case.expected", lang="en") == "expected:"
    assert messages.sentence("an unknown sentence") == "an unknown sentence"
    with pytest.raises(KeyError, match="msg_id"):
        messages.text("no.such.id")


def test_chinese_lines_of_a_paragraph_join_without_a_space():
    text = ("第一句，\n  第二句。\n* 一项\n  继续 `x`，\n  接着\n\n```text\n代码，\n保留\n```\n"
            "English\nwords，\nmixed 中文")
    assert editions.join_cjk_lines(text) == ("第一句，第二句。\n* 一项继续 `x`，接着\n\n```text\n代码，\n保留\n```\n"
                                             "English\nwords，\nmixed 中文")
    for lab in ("lab05", "lab07"):
        for cell in editions.edition(lab, LANG).cells:
            if cell.cell_type == "markdown" and "```" not in cell.source:
                assert not re.search("[\u4e00-\u9fff，。；：）]\n[ \t]*[\u4e00-\u9fff（]", cell.source), (lab, cell.get("id"))
