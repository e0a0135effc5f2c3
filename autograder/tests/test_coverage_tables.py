"""Every lab's contract-coverage table (in its graders' package docstring) names real cases.

A row is `| clause | case(s) |`; the case column lists hidden case names separated by
commas, where `name_..` stands for the cases starting with `name_` (`.._name` for those
ending with it), `*` is a wildcard, and
a phrase starting with "every" ("every value case") speaks of a group. A row that only
continues the clause of the row above may leave the case column empty. The test fails when a
listed name matches no collected case (a renamed or deleted case leaves its clause
uncovered), or when a clause row names no case at all.
"""
from __future__ import annotations

import fnmatch
import importlib
import re

import pytest

from autograder.core import get_tests, labs

NAME = re.compile(r"^[a-z0-9_*]+(\.\.)?$")


def rows(doc: str) -> list[tuple[str, list[str]]]:
    """(clause, case tokens) per table row; continuation lines are joined to their row."""
    out: list[tuple[str, list[str]]] = []
    for line in doc.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not line.strip().startswith("|"):
            continue
        clause, cases = parts[1], "|".join(parts[2:-1])
        if clause.strip() in ("clause", "function / clause") or (clause.strip() and set(clause.strip()) <= {"-"}):
            continue
        cont = clause.startswith("   ") or not clause.strip()    # an indented or empty clause: a wrap
        tokens = [t.strip() for t in re.sub(r"\([^)]*\)", "", cases).split(",") if t.strip()]
        if out and cont:
            out[-1] = ((out[-1][0] + " " + clause.strip()).strip(), out[-1][1] + tokens)
        else:
            out.append((clause.strip(), tokens))
    return out


def matches(token: str, names: set[str]) -> bool:
    if token.startswith("every") or token == "..":
        return True
    token = token.split()[0]
    if token.startswith("..") and len(token) > 2:
        return any(n.endswith(token[2:]) for n in names)
    if token.endswith(".."):
        return any(n.startswith(token[:-2]) for n in names)
    return any(fnmatch.fnmatchcase(n, token) for n in names)


@pytest.mark.parametrize("lab", labs())
def test_the_coverage_table_names_existing_cases(lab):
    doc = importlib.import_module(f"autograder.graders.{lab}").__doc__ or ""
    table = rows(doc)
    assert len(table) >= 3, f"{lab}: no contract-coverage table in autograder/graders/{lab}/__init__.py"
    names = {c.name for t in get_tests(lab).values() for c in t.cases}
    unknown, empty = [], []
    for clause, tokens in table:
        if not tokens:
            empty.append(clause)
        for tok in tokens:
            if not matches(tok, names):
                unknown.append(f"{tok!r} (clause: {clause[:60]})")
    assert not empty, f"{lab}: clauses with no hidden case: {empty}"
    assert not unknown, f"{lab}: the coverage table names cases that do not exist: {unknown}"


def test_a_stale_name_or_an_uncovered_clause_fails_the_check():
    doc = ("| clause | case(s) |\n| a | real_case |\n| b | gone_case, real_.. |\n|   b goes on | .._case |\n"
           "| c | every value case |\n|  | gone_too |\n| d, uncovered |  |\n")
    names = {"real_case"}
    got = [(c, toks, [t for t in toks if not matches(t, names)]) for c, toks in rows(doc)]
    assert got == [("a", ["real_case"], []), ("b b goes on", ["gone_case", "real_..", ".._case"], ["gone_case"]),
                   ("c", ["every value case", "gone_too"], ["gone_too"]), ("d, uncovered", [], [])]
