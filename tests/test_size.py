"""autograder.size: words to read and lines to write per exercise, on hand-made notebooks."""
from __future__ import annotations

import json

import pytest

from autograder import size
from autograder.cli import main as cli_main


def nb(*cells) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def solution(gid: str, text: str) -> dict:
    return {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": gid, "solution": True}}, "source": text,
            "outputs": [], "execution_count": None}


def code(text: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


GIVEN = 'def f(x):\n    """Twice x."""\n    raise NotImplementedError\n'          # 6 words, 2 code lines
SOLVED = ('def f(x):\n    """Twice x."""\n    # the doubling\n\n    y = x + x\n    return y  # done\n')  # 3 code lines


def write(tmp_path, release: dict, solved: dict):
    r, s = tmp_path / "release.ipynb", tmp_path / "solution.ipynb"
    r.write_text(json.dumps(release))
    s.write_text(json.dumps(solved))
    return r, s


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    assert size.code_lines(GIVEN) == 2
    assert size.code_lines(SOLVED) == 3
    assert size.code_lines('"""Module."""\nclass A:\n    """Doc\n    on two lines."""\n    x = "# not a comment"\n') == 2
    assert size.code_lines("def broken(:\n    # note\n    pass\n") == 2       # does not parse: blanks and comments only


def test_words_before_each_exercise_and_lines_it_adds(tmp_path):
    words = " ".join(["w"] * 150)
    release = nb(md("Title here"), code("import math"), md(words), solution("f", GIVEN), code("check()"),
                 md("one two three"), solution("g", "x = 1\n"), md("the end of it"))
    solved = nb(md("Title here"), code("import math"), md(words), solution("f", SOLVED), code("check()"),
                md("one two three"), solution("g", "x = 1\ny = 2\nz = 3\n"), md("the end of it"))
    exercises, rest = size.measure(*write(tmp_path, release, solved))
    assert [(e.name, e.words, e.lines) for e in exercises] == [("f", 2 + 150 + 6, 1), ("g", 3 + 3, 2)]
    assert rest == 4
    assert exercises[0].minutes() == pytest.approx(158 / 100 + 1)
    table, suggested = size.report("labXX", exercises, rest)
    assert "| f | 158 | 1 | 3 |" in table and "| **labXX** | 168 | 3 | 5 |" in table
    assert suggested == 15
    assert size.report("labXX", exercises, rest, words_per_minute=10, minutes_per_line=10)[1] == 60  # 16.8 + 30 -> 60


def test_a_solution_that_deletes_given_lines_adds_none(tmp_path):
    release = nb(solution("f", "a = 1\nb = 2\nc = 3\n"))
    exercises, _ = size.measure(*write(tmp_path, release, nb(solution("f", "a = 1\n"))))
    assert exercises[0].lines == 0


def test_bad_input_names_what_is_wrong(tmp_path, capsys):
    release = nb(md("no exercise"))
    with pytest.raises(size.SizeError, match="has no solution cell"):
        size.measure(*write(tmp_path, release, release))
    release = nb(solution("f", GIVEN))
    with pytest.raises(size.SizeError, match="has no solution cell 'f'"):
        size.measure(*write(tmp_path, release, nb(md("x"))))
    (tmp_path / "bad.ipynb").write_text("{")
    with pytest.raises(size.SizeError, match="cannot read the notebook"):
        size.measure(tmp_path / "bad.ipynb", tmp_path / "bad.ipynb")
    assert cli_main(["size", "--lab", "lab99"]) == 2
    assert "`--lab` must be one of lab00" in capsys.readouterr().err
    assert cli_main(["size", "--lab", "lab01", "--minutes-per-line", "0"]) == 2
    assert "`--minutes-per-line` must be > 0, got 0." in capsys.readouterr().err


def test_every_lab_is_measured_from_its_release_and_solution(capsys):
    assert cli_main(["size", "--lab", "lab05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("lab05: a size estimate") and "| kv_bytes_per_token |" in out and "| **lab05** |" in out


def test_the_syllabus_quotes_the_size_estimate_for_labs_05_to_07():
    """Until a class's timing replaces it (the syllabus says how), the time of labs 05-07 is the
    size model's; a lab that grows or shrinks makes this fail until its syllabus time follows."""
    from course import docs

    import re

    times = docs.lab_times()
    for lab in ("lab05", "lab06", "lab07"):
        exercises, rest = size.measure(size.ROOT / "labs" / lab / f"{lab}.ipynb",
                                       size.ROOT / "solutions" / lab / f"{lab}.ipynb")
        table, suggested = size.report(lab, exercises, rest)
        words, lines, minutes = re.search(r"\| \*\*%s\*\* \| (\d+) \| (\d+) \| (\d+) \|" % lab, table).groups()
        text = " ".join((size.ROOT / "course" / "syllabus" / f"{lab}.md").read_text(encoding="utf-8").split())
        fix = f"course/syllabus/{lab}.md: quote `python -m autograder size --lab {lab}`"
        assert times[lab]["alone"] == suggested, fix
        assert f"counts {int(words):,} words to read and {lines} lines to write" in text, fix
        assert f"that is {minutes} minutes" in text, fix
