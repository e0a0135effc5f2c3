"""Language editions of the labs: one source notebook, translations beside it.

    python -m autograder.editions status [labNN ...] [--lang zh]   # exit 1 if any translation is missing or stale
    python -m autograder.editions update labNN [--lang zh] [--accept CELL_ID ...]

solutions/labNN/labNN.ipynb is the only source of the code, the tests and the English text.
A translation is solutions/i18n/<lang>/labNN.json, keyed by the notebook's stable cell ids
(nbformat 4.5 `id`). Two kinds of cell are translated:

* every markdown cell (the whole text);
* every solution cell's docstrings (the contract of an exercise stub); the code around them
  is never translated, so code, tests and grade ids are the same in every edition.

Each entry stores the English it was made from and its SHA-256. When the English changes,
the stored hash no longer matches and the entry is *stale*: `status` names the cell id,
and the edition falls back to English for that cell until a translator updates `zh`
(or the language's key) and runs `update labNN --accept CELL_ID`.

Adding a translation for a new lab is mechanical:
1. `python -m autograder.editions update labNN --lang zh` writes solutions/i18n/zh/labNN.json
   with an entry per translatable cell (`"zh": null`).
2. Fill every `zh` (markdown: the whole cell; docstrings: one string per docstring, same
   order), using the glossary's Chinese terms (course/GLOSSARY.md).
3. `python -m autograder.editions status labNN` until it reports nothing, then
   `python -m autograder.release labNN` (writes labs/labNN and labs/zh/labNN).
"""
from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
LANGUAGES = ("zh",)
FORMAT = 1


class TranslationError(ValueError):
    """A translation file that does not fit its notebook."""


def translation_path(lab: str, lang: str, root: Path | None = None) -> Path:
    return Path(root or ROOT) / "solutions" / "i18n" / lang / f"{lab}.json"


def source_path(lab: str, root: Path | None = None) -> Path:
    return Path(root or ROOT) / "solutions" / lab / f"{lab}.ipynb"


# ---------------------------------------------------------------- what is translatable

def _nbgrader(cell) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def docstring_spans(source: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the *contents* of each top-level function or class
    docstring in `source` (between the triple quotes), in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        a = starts[first.lineno - 1] + _col(source, starts, first.lineno, first.col_offset)
        b = starts[first.end_lineno - 1] + _col(source, starts, first.end_lineno, first.end_col_offset)
        literal = source[a:b]
        quote = literal[:3] if literal[:3] in ('"""', "'''") else None
        if quote is None or literal[-3:] != quote:
            continue  # only plain triple-quoted docstrings are translated
        spans.append((a + 3, b - 3))
    return spans


def _col(source: str, starts: list[int], lineno: int, byte_col: int) -> int:
    """ast gives UTF-8 byte columns; turn one into a character column."""
    line = source[starts[lineno - 1]:starts[lineno]] if lineno < len(starts) else source[starts[lineno - 1]:]
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def kind_of(cell) -> str | None:
    """"markdown", "docstrings" or None (not translated)."""
    if cell.get("cell_type") == "markdown":
        return "markdown"
    if cell.get("cell_type") == "code" and _nbgrader(cell).get("solution") and docstring_spans(cell.source):
        return "docstrings"
    return None


def english(cell):
    """What a translation of `cell` translates: the markdown text, or the list of docstrings."""
    kind = kind_of(cell)
    if kind == "markdown":
        return cell.source
    if kind == "docstrings":
        return [cell.source[a:b] for a, b in docstring_spans(cell.source)]
    return None


def digest(text) -> str:
    data = text if isinstance(text, str) else "\0".join(text)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- reading and checking

def load(lab: str, lang: str, root: Path | None = None) -> dict:
    path = translation_path(lab, lang, root)
    if not path.is_file():
        raise TranslationError(f"{lab} has no {lang} translation: {path.relative_to(Path(root or ROOT))} is missing "
                               f"(run `python -m autograder.editions update {lab} --lang {lang}`).")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("lab") != lab or data.get("language") != lang or not isinstance(data.get("cells"), dict):
        raise TranslationError(f"{path.name} is not a {lang} translation of {lab}.")
    return data


def problems(nb, data: dict, lang: str) -> list[str]:
    """Every translatable cell without a current translation, each naming its cell id."""
    out = []
    seen = set()
    for cell in nb.cells:
        cid = cell.get("id")
        kind = kind_of(cell)
        if kind is None:
            continue
        if not cid:
            out.append(f"a {cell.cell_type} cell has no id (nbformat 4.5 cell ids are required): {cell.source[:50]!r}")
            continue
        seen.add(cid)
        entry = data["cells"].get(cid)
        text = (entry or {}).get(lang)
        if entry is None or text in (None, "", []):
            out.append(f"cell {cid!r}: no {lang} translation")
        elif entry.get("source_sha256") != digest(english(cell)):
            out.append(f"cell {cid!r}: stale {lang} translation (the English changed since it was translated)")
        elif kind == "docstrings" and (not isinstance(text, list) or len(text) != len(english(cell))):
            out.append(f"cell {cid!r}: {len(english(cell))} docstring(s) to translate, "
                       f"the {lang} entry is not a list of that length")
        elif kind == "markdown" and not isinstance(text, str):
            out.append(f"cell {cid!r}: the {lang} entry of a markdown cell must be a string")
    for cid in sorted(set(data["cells"]) - seen):
        out.append(f"cell {cid!r}: translated, but the notebook has no translatable cell with that id")
    return out


CJK_LANGS = ("zh",)
_CJK = ("\u3000-\u303f"      # CJK punctuation
        "\u3400-\u4dbf\u4e00-\u9fff"   # ideographs
        "\uff00-\uffef")     # full-width forms (，：；（）)
_CJK_BREAK = re.compile(f"(?<=[{_CJK}])\n[ \t]*(?=[{_CJK}])")


def join_cjk_lines(text: str) -> str:
    """Markdown turns a line break inside a paragraph into a space, which is right between
    English words and wrong between Chinese characters. Join the lines of a translation where
    a line ends and the next begins with a CJK character, outside fenced code."""
    parts = re.split(r"(^```.*?^```[^\n]*$)", text, flags=re.M | re.S)
    return "".join(p if p.startswith("```") else _CJK_BREAK.sub("", p) for p in parts)


def translate(nb, data: dict, lang: str, *, strict: bool = True):
    """A copy of `nb` with every translatable cell in `lang`. strict: raise TranslationError
    naming the cells that lack a current translation; otherwise keep their English."""
    found = problems(nb, data, lang)
    if found and strict:
        raise TranslationError("; ".join(found))
    out = copy.deepcopy(nb)
    for cell in out.cells:
        cid, kind = cell.get("id"), kind_of(cell)
        entry = data["cells"].get(cid) or {}
        text = entry.get(lang)
        if kind is None or text in (None, "", []) or entry.get("source_sha256") != digest(english(cell)):
            continue
        if kind == "markdown" and isinstance(text, str):
            cell.source = join_cjk_lines(text) if lang in CJK_LANGS else text
        elif kind == "docstrings" and isinstance(text, list) and len(text) == len(docstring_spans(cell.source)):
            src = cell.source
            for (a, b), new in reversed(list(zip(docstring_spans(src), text))):
                src = src[:a] + new + src[b:]
            cell.source = src
    out.metadata["language"] = lang
    return out


def edition(lab: str, lang: str, *, root: Path | None = None, strict: bool = True):
    """The `lang` edition of solutions/labNN/labNN.ipynb (a notebook node)."""
    nb = nbformat.read(str(source_path(lab, root)), as_version=4)
    return translate(nb, load(lab, lang, root), lang, strict=strict)


def update(lab: str, lang: str, accept: list[str] = (), root: Path | None = None) -> dict:
    """Bring the translation file in line with the notebook: add an empty entry for every new
    translatable cell, drop entries of cells that are gone, and for the ids in `accept`
    record the current English (and its hash) as the one the translation was made from."""
    nb = nbformat.read(str(source_path(lab, root)), as_version=4)
    path = translation_path(lab, lang, root)
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else \
        {"format": FORMAT, "lab": lab, "language": lang, "cells": {}}
    cells = {}
    for cell in nb.cells:
        kind, cid = kind_of(cell), cell.get("id")
        if kind is None or not cid:
            continue
        entry = dict(data["cells"].get(cid) or {"kind": kind, "source_sha256": digest(english(cell)),
                                                "en": english(cell), lang: None})
        if cid in accept:
            entry.update(kind=kind, source_sha256=digest(english(cell)), en=english(cell))
        cells[cid] = entry
    unknown = set(accept) - set(cells)
    if unknown:
        raise TranslationError(f"`accept` names cells {sorted(unknown)} that {lab} does not have.")
    data["cells"] = cells
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return data


def translated_labs(lang: str, root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (Path(root or ROOT) / "solutions" / "i18n" / lang).glob("lab[0-9][0-9].json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.editions", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="list missing and stale translations (exit 1 if any)")
    st.add_argument("labs", nargs="*")
    st.add_argument("--lang", default="zh", choices=LANGUAGES)
    up = sub.add_parser("update", help="add entries for new cells; --accept marks a translation current")
    up.add_argument("lab")
    up.add_argument("--lang", default="zh", choices=LANGUAGES)
    up.add_argument("--accept", nargs="*", default=[])
    args = ap.parse_args(argv)
    if args.command == "update":
        data = update(args.lab, args.lang, args.accept)
        empty = [cid for cid, e in data["cells"].items() if e.get(args.lang) in (None, "", [])]
        print(f"{translation_path(args.lab, args.lang).relative_to(ROOT)}: {len(data['cells'])} cells, "
              f"{len(empty)} without a translation")
        return 0
    labs = args.labs or sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]"))
    bad = 0
    for lab in labs:
        try:
            nb = nbformat.read(str(source_path(lab)), as_version=4)
            found = problems(nb, load(lab, args.lang), args.lang)
        except TranslationError as e:
            found = [str(e)]
        for p in found:
            print(f"{lab}: {p}")
        bad += len(found)
    print("all translations current" if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
