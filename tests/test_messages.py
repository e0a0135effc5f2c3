"""Feedback in the learner's language: the message catalog, hint templates, the language
choice, and every report writer (in-kernel checks, feedback.md, Gradescope, `check`)."""
import json
import re
import runpy
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder import core, kernel, messages, reports
from autograder.cli import build_parser
from autograder.core import CaseResult, TestResult as Result

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u4e00-\u9fff]")
ZH = messages.catalog("zh")["sentences"]


@pytest.fixture(autouse=True)
def _no_language_from_the_environment(monkeypatch):
    monkeypatch.delenv(messages.LANG_ENV, raising=False)
    monkeypatch.delenv(messages.SESSION_ENV, raising=False)


# ---------------------------------------------------------------- the catalog is complete

def test_every_hint_sentence_of_the_graders_has_a_chinese_translation():
    found = messages.hint_templates()
    assert len(found) > 100, "the scan should find the graders' hints"
    missing = [f"{t!r} ({', '.join(found[t][:2])})" for t in found if t not in ZH]
    assert not missing, ("hint sentences without a zh translation in autograder/messages/zh.json "
                         "(\"sentences\"; key = the English template):\n  " + "\n  ".join(missing))


def test_translations_keep_placeholders_code_and_backticked_text():
    problems = []
    for en, zh in ZH.items():
        if sorted(messages.fields(en)) != sorted(messages.fields(zh)):
            problems.append(f"{en!r}: placeholders {messages.fields(en)} vs {messages.fields(zh)}")
        lost = [t for t in re.findall(r"`[^`]+`", en) if t not in zh]
        if lost:
            problems.append(f"{en!r}: backticked text lost in the translation: {lost}")
        if re.search(r"[A-Za-z]{3,}", en) and not CJK.search(zh) and not re.fullmatch(r"[\x00-\x7f]*=.*", en):
            problems.append(f"{en!r}: not translated")
    assert not problems, "\n".join(problems)


def test_the_scan_finds_hints_in_every_form_the_graders_write_them(tmp_path):
    module = tmp_path / "labXX.py"
    module.write_text(textwrap.dedent('''
        from autograder.core import Case, Fail
        ZERO_HINT = ("T == 0 is greedy: "
                     "keep the argmax.")
        HINTS = {"peaked": "Subtract the max first.", "flat": "Equal logits give 1/V."}
        MORE_HINTS = dict(HINTS)
        MORE_HINTS.update({"masked": "-inf stays -inf."})
        PREFIX = "Each step is observed as [op]. "

        def explain(kind):
            return ("not a hint: the message", "Replace the stub.")

        def _judge(name, hint):
            def judge(obs):
                sentence, generic = explain(obs)
                if obs:
                    raise Fail(f"{name} is wrong", hint=generic or hint)
                raise Fail("bad", hint=f"Check `{name}` first and raise {obs!r}.")
            return judge

        def _case(name, hint=ZERO_HINT):
            return Case(name, 1, None, _judge(name, hint), hint=hint)

        def helper(x):
            return "not a hint either"

        TESTS = [
            _case("a"),
            _case("b", "Sort descending " + "(stable)."),
            _case("c", HINTS.get("peaked")),
            Case("d", 1, None, _judge("d", MORE_HINTS["masked"])),
            Case("e", 1, None, None, hint=PREFIX + "Compare your counts." if helper(1) else None),
            Case("f", 1, None, None, False, None, "Positional hint."),
        ]
    '''))
    found = set(messages.hint_templates([module]))
    assert found == {
        "T == 0 is greedy: keep the argmax.", "Subtract the max first.", "Equal logits give 1/V.",
        "-inf stays -inf.", "Replace the stub.", "Check `{name}` first and raise {obs}.",
        "Sort descending (stable).", "Each step is observed as [op]. Compare your counts.", "Positional hint.",
    }, found
    assert "not a hint: the message" not in found and "not a hint either" not in found


# ---------------------------------------------------------------- sentences and templates

def test_sentence_exact_entries_templates_and_values_kept_as_they_are():
    exact = "Replace `raise NotImplementedError()` with your solution."
    assert messages.sentence(exact, "zh") == ZH[exact]
    assert messages.sentence(exact, "en") == exact
    # a template: the fixed parts match, the captured values go into the Chinese unchanged
    hint = "Check `top_p` first and raise ValueError with a message naming it."
    assert messages.sentence(hint, "zh") == "先检查 `top_p`，并抛出 ValueError，错误消息要写出这个参数名。"
    odd = "Keep the name `a.b*(c)+[d]` from the stub; the grader calls it by name."
    assert "`a.b*(c)+[d]`" in messages.sentence(odd, "zh") and CJK.search(messages.sentence(odd, "zh"))
    # literal braces in a template ({{ }}) and a value captured between them
    assert messages.sentence('End the message with ", got {top_k!r}." so the caller sees the bad value.', "zh") \
        == '错误消息以 ", got {top_k!r}." 结尾，让调用者看到错误的值。'
    # a sentence that is not in the catalog, or only starts like a template, stays English
    assert messages.sentence("Something else entirely.", "zh") == "Something else entirely."
    assert messages.sentence(hint + " And more.", "zh") == hint + " And more."
    # a frame with a clause added inside its last brackets is another sentence: it stays English
    longer = "entropy differs from the expected value (largest difference at flat index 0) (in bits)"
    assert messages.sentence(longer, "zh") == longer
    assert messages.sentence(longer.replace(" (in bits)", ""), "zh") == "entropy 与期望值不同（最大差异在展平后的下标 0 处）"
    assert messages.sentence(None, "zh") is None and messages.sentence("", "zh") == ""


def test_the_most_specific_template_wins(monkeypatch):
    table = {"Use {x}.": "用 {x}。", "Use {x} now.": "现在用 {x}。", "Use torch.{y} now.": "现在用 torch.{y}。"}
    monkeypatch.setitem(messages.catalog("zh"), "sentences", table)
    messages._table.cache_clear()
    messages._templates.cache_clear()
    try:
        assert messages.sentence("Use torch.sort now.", "zh") == "现在用 torch.sort。"
        assert messages.sentence("Use numpy now.", "zh") == "现在用 numpy。"
        assert messages.sentence("Use numpy.", "zh") == "用 numpy。"
    finally:
        messages._table.cache_clear()
        messages._templates.cache_clear()


def test_fixed_failure_messages_are_translated_with_their_values():
    stub = {"greedy_token": lambda logits: (_ for _ in ()).throw(NotImplementedError())}
    results = [core.run_test(t, stub) for t in core.get_tests("lab00").values()]
    msg = next(c.message for r in results for c in r.cases if not c.passed)
    call = msg.split(" is not implemented yet")[0]
    assert call.startswith("greedy_token(")
    assert messages.sentence(msg, "zh") == f"{call} 还没有实现（函数桩仍然抛出 NotImplementedError）"
    boom = "your code raised KeyError: 'x' (at line 3: d['x'])"
    assert messages.sentence(boom, "zh") == "你的代码抛出了 KeyError：'x' (at line 3: d['x'])"
    assert messages.sentence("no function named `top_k_filter` was found", "zh") == \
        "没有找到名为 `top_k_filter` 的函数"
    frames = messages.catalog("zh")["frames"]
    assert all(sorted(messages.fields(k)) == sorted(messages.fields(v)) for k, v in frames.items())


# ---------------------------------------------------------------- which language

def _notebook(path, language=None):
    meta = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}
    if language:
        meta["language"] = language
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": meta, "cells": []}))
    return path


def test_language_order_argument_then_environment_then_the_running_notebook(tmp_path, monkeypatch):
    zh_nb = _notebook(tmp_path / "zh" / "lab01" / "lab01.ipynb", "zh")
    en_nb = _notebook(tmp_path / "lab01" / "lab01.ipynb")
    assert messages.language() == "en"
    monkeypatch.setenv(messages.SESSION_ENV, str(zh_nb))          # what Jupyter Server sets
    assert messages.language() == "zh" and messages.text("case.hint") == "提示："
    monkeypatch.setenv(messages.LANG_ENV, "en")
    assert messages.language() == "en", "COURSE_LANG comes before the notebook"
    assert messages.language("zh") == "zh", "the argument comes first"
    monkeypatch.delenv(messages.LANG_ENV)
    monkeypatch.setenv(messages.SESSION_ENV, str(en_nb))
    assert messages.language() == "en"
    # a path relative to the server's root: found from the kernel's working folder upwards
    monkeypatch.chdir(zh_nb.parent)
    monkeypatch.setenv(messages.SESSION_ENV, "zh/lab01/lab01.ipynb")
    assert messages.language() == "zh"
    monkeypatch.setenv(messages.SESSION_ENV, "zh/lab01/gone.ipynb")
    assert messages.language() == "en"
    monkeypatch.setenv(messages.LANG_ENV, "fr_FR.UTF-8")
    assert messages.language() == "en", "an unknown language is English"
    monkeypatch.setenv(messages.LANG_ENV, "zh_CN.UTF-8")
    assert messages.language() == "zh"


def test_the_chinese_release_says_it_is_chinese():
    for lab in ("lab00", "lab01"):
        assert messages.notebook_language(ROOT / "labs" / "zh" / lab / f"{lab}.ipynb") == "zh"
        assert messages.notebook_language(ROOT / "labs" / lab / f"{lab}.ipynb") is None


def test_jupyter_server_names_the_notebook_in_the_kernel_environment(tmp_path, monkeypatch):
    """The language detection relies on this: Jupyter Server starts a notebook's kernel with
    JPY_SESSION_NAME = the notebook's path (the installed jupyter_server's own code)."""
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from jupyter_server.services.sessions.sessionmanager import SessionManager
    nb = _notebook(tmp_path / "zh" / "lab01" / "lab01.ipynb", "zh")
    sm = SessionManager(kernel_manager=MappingKernelManager(root_dir=str(tmp_path)))
    env = sm.get_kernel_env("zh/lab01/lab01.ipynb", "lab01.ipynb")
    assert Path(env[messages.SESSION_ENV]) == nb
    monkeypatch.setenv(messages.SESSION_ENV, env[messages.SESSION_ENV])
    assert messages.language() == "zh"


# ---------------------------------------------------------------- the reports

def _results(lab, variant=None):
    ns = runpy.run_path(str(variant)) if variant else {}
    return [core.run_test(t, ns) for t in core.get_tests(lab).values()]


def _record(results, language=None):
    rec = {"schema": reports.SCHEMA, "harness": "standalone", "student": "s1", "lab": results[0].lab,
           "file": "x.ipynb", "submission_sha256": "", "grader_version": "v", "graded_at": "t",
           "status": "graded", "score": sum(r.score for r in results),
           "max_score": sum(r.max_score for r in results), "problems": [],
           "tests": [r.to_dict() for r in results], "output_tail": "", "restarts": 0, "seconds": 1.0,
           "sandbox": None, "limits": None}
    if language:
        rec["language"] = language
    return rec


def test_english_report_lines_are_what_they_always_were():
    c = CaseResult("peaked", 0.0, 1.0, False, True, "peaked_row", "greedy_token returned 2", 0, 2,
                   "The greedy token is the index of the largest logit.")
    assert reports.case_line(c) == (
        "  FAIL peaked [fixture peaked_row] (0/1)\n"
        "       greedy_token returned 2\n"
        "       expected: 0\n"
        "       got:      2\n"
        "       hint: The greedy token is the index of the largest logit.")
    r = Result("lab00", "t", "d", [c])
    assert reports.test_text(r).startswith("lab00 / t: 0 of 1 points\n")
    assert reports.case_line(c, lang="zh") == (
        "  未通过 peaked [测试夹具 peaked_row] (0/1)\n"
        "       greedy_token returned 2\n"
        "       期望：0\n"
        "       实际：2\n"
        "       提示：贪心词元就是最大 logit 的下标。")


def test_feedback_and_gradescope_follow_the_edition_with_the_same_points():
    variant = ROOT / "autograder" / "variants" / "lab00" / "bug_nan_not_checked.py"
    results = _results("lab00", variant)
    hints = [c.hint for r in results for c in r.cases if c.hint and not c.passed]
    assert hints, "the variant fails a case with a hint"
    en_rec, zh_rec = _record(results), _record(results, "zh")
    en, zh = reports.feedback_markdown(en_rec), reports.feedback_markdown(zh_rec)
    assert not CJK.search(en) and en == reports.feedback_markdown(zh_rec, lang="en")
    assert "# lab00 反馈：s1" in zh and "**得分：" in zh and "第一个未通过的用例" in zh
    assert messages.sentence(hints[0], "zh") in zh and CJK.search(messages.sentence(hints[0], "zh"))
    for r in results:     # names, case names and values are never translated; descriptions are
        assert f"## {r.name}：{r.score:g} / {r.max_score:g}" in zh
        assert f"\n{messages.sentence(r.description, 'zh')}\n" in zh and r.description not in zh
        assert all(f"| {c.name} |" in zh for c in r.cases)
    gs_en, gs_zh = reports.gradescope_results(en_rec), reports.gradescope_results(zh_rec)
    assert [t["score"] for t in gs_en["tests"]] == [t["score"] for t in gs_zh["tests"]]
    assert gs_en["score"] == gs_zh["score"] and reports.validate_gradescope(gs_zh) == []
    assert any("(隐藏检查)" in t["name"] for t in gs_zh["tests"]) and "分" in gs_zh["output"]
    assert not any(CJK.search(t["output"] + t["name"]) for t in gs_en["tests"])
    assert reports.gradescope_results(zh_rec, lang="en") == gs_en
    check = reports.check_text(zh_rec)
    assert "可见检查" in check and not CJK.search(reports.check_text(en_rec))


def test_the_record_keeps_the_edition_and_no_translated_text(tmp_path):
    nb = tmp_path / "s1.ipynb"
    shutil.copy(ROOT / "labs" / "zh" / "lab00" / "lab00.ipynb", nb)
    results = _results("lab00")
    graded = SimpleNamespace(lab="lab00", harness_error=None, score=0.0, max_score=6.0, problems=[],
                             tests=results, output="", restarts=0, seconds=0.1, sandbox="none")
    rec = reports.record("s1", SimpleNamespace(fatal=None, path=nb, sha256=""), graded, version="v")
    assert rec["language"] == "zh" and not CJK.search(json.dumps(rec["tests"], ensure_ascii=False))
    paths = reports.write_student(tmp_path / "out", rec)
    assert "反馈" in paths["feedback"].read_text(encoding="utf-8")
    paths = reports.write_student(tmp_path / "out", rec, lang="en")
    assert not CJK.search(paths["feedback"].read_text(encoding="utf-8"))


def _self_check(lab, ns):
    import io
    buf = io.StringIO()
    summary = kernel.self_check(lab, ns, out=buf)
    return buf.getvalue(), summary


def test_self_check_speaks_the_notebooks_language_and_scores_the_same(tmp_path, monkeypatch):
    variant = ROOT / "autograder" / "variants" / "lab00" / "bug_returns_tensor_list.py"
    ns = runpy.run_path(str(variant))
    en_out, en = _self_check("lab00", dict(ns))
    en_repr = repr(en)
    monkeypatch.setenv(messages.SESSION_ENV, str(ROOT / "labs" / "zh" / "lab00" / "lab00.ipynb"))
    zh_out, zh = _self_check("lab00", dict(ns))
    assert (en.passed, en.total) == (zh.passed, zh.total) and not en.all_passed
    assert en_out.startswith("Self-check of lab00: the visible checks of ") and not CJK.search(en_out)
    assert zh_out.startswith("lab00 自检：") and "需要修改的地方：" in zh_out and "提示：" in zh_out
    failing_hint = next(c.hint for r in _results("lab00", variant) for c in r.cases
                        if c.visible and not c.passed and c.hint)
    assert messages.sentence(failing_hint, "zh") in zh_out and CJK.search(messages.sentence(failing_hint, "zh"))
    assert "仍未通过：" in repr(zh) and "still failing:" in en_repr
    # a function that is not defined yet: the template hint carries its name unchanged
    out, _ = _self_check("lab00", {})
    assert "这个内核中还没有定义：" in out and "保留函数桩中的名字 `greedy_token`" in out


def test_cli_lang_option():
    p = build_parser()
    assert p.parse_args(["check", "x.ipynb", "--lang", "zh"]).lang == "zh"
    assert p.parse_args(["grade", "x.ipynb", "--out", "o"]).lang is None
    with pytest.raises(SystemExit):
        p.parse_args(["check", "x.ipynb", "--lang", "klingon"])


def test_check_command_reports_a_chinese_notebook_in_chinese(tmp_path):
    from autograder.release import nbgrader_env
    nb = tmp_path / "lab00.ipynb"
    shutil.copy(ROOT / "labs" / "zh" / "lab00" / "lab00.ipynb", nb)
    p = subprocess.run([sys.executable, "-m", "autograder", "check", str(nb)], cwd=ROOT, env=nbgrader_env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr
    assert "greedy_token_picks_argmax：可见检查" in p.stdout and "未通过 peaked_distribution" in p.stdout
    assert "提示：" in p.stdout and "继续加油" in p.stdout


def test_standalone_grader_gives_equal_points_and_feedback_in_each_students_edition(tmp_path):
    """The same code submitted in the English and the Chinese edition: equal points and an
    equal record apart from its language; the feedback follows each edition; --lang overrides."""
    import nbformat
    from autograder.release import nbgrader_env
    from autograder.tests.submissions import from_variant, write
    bug = ROOT / "autograder" / "variants" / "lab00" / "bug_tie_highest_id.py"
    en_nb = from_variant("lab00", bug)
    zh_nb = nbformat.read(str(ROOT / "labs" / "zh" / "lab00" / "lab00.ipynb"), as_version=4)
    code = {c.id: c.source for c in en_nb.cells if (c.metadata.get("nbgrader") or {}).get("solution")}
    for c in zh_nb.cells:
        if c.id in code:
            c.source = code[c.id]
    write(en_nb, tmp_path / "subs" / "ann.ipynb")
    write(zh_nb, tmp_path / "subs" / "li.ipynb")
    out = tmp_path / "grades"

    def grade(*extra):
        return subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "subs"), "--lab", "lab00",
                               "--out", str(out), "--quiet", *extra], cwd=ROOT, env=nbgrader_env(),
                              capture_output=True, text=True, timeout=600)

    p = grade()
    assert p.returncode == 0, p.stdout + p.stderr
    ann, li = (json.loads((out / "students" / f"{s}.json").read_text()) for s in ("ann", "li"))
    assert ann["score"] == li["score"] < ann["max_score"]
    assert [t["score"] for t in ann["tests"]] == [t["score"] for t in li["tests"]]
    assert ann["tests"] == li["tests"], "the record holds no translated text"
    assert ann.get("language") is None and li["language"] == "zh"
    en_fb = (out / "feedback" / "ann.md").read_text(encoding="utf-8")
    zh_fb = (out / "feedback" / "li.md").read_text(encoding="utf-8")
    hint = next(c["hint"] for t in ann["tests"] for c in t["cases"] if not c["passed"] and c["hint"])
    assert "First failing case: **`exact_tie_goes_to_lowest_id`** on fixture `ties`" in en_fb
    assert f"- hint: {hint}" in en_fb and not CJK.search(en_fb)
    assert "第一个未通过的用例：**`exact_tie_goes_to_lowest_id`**（测试夹具 `ties`）" in zh_fb
    assert f"- 提示：{messages.sentence(hint, 'zh')}" in zh_fb and CJK.search(messages.sentence(hint, "zh"))
    gs = json.loads((out / "gradescope" / "li" / "results.json").read_text(encoding="utf-8"))
    assert gs["score"] == li["score"] and "分" in gs["output"]
    # --lang en: the feedback is written in English (a finished batch's records are graded
    # again: no record key outlives the batch that signed with it, see autograder.batch)
    p = grade("--lang", "en")
    assert p.returncode == 0 and "graded 2, up to date 0" in p.stdout, p.stdout + p.stderr
    rewritten = (out / "feedback" / "li.md").read_text(encoding="utf-8")
    assert rewritten.startswith("# lab00 feedback: li\n") and not CJK.search(rewritten)
    assert f"- hint: {hint}" in rewritten


def test_the_gradescope_bundle_carries_the_catalogs(tmp_path):
    """Gradescope's container has only the bundle: the reports must find their words in it."""
    import zipfile
    from autograder.gradescope import build_bundle
    bundle = build_bundle("lab00", tmp_path / "gs")
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "source")
    assert {f"autograder/messages/{lang}.json" for lang in messages.languages()} <= names
    code = ("import autograder.reports as r, autograder.messages as m; "
            "assert m.__file__.startswith(%r), m.__file__; print(m.text('case.hint', 'zh'))" % str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "source", capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "提示：", p.stderr
