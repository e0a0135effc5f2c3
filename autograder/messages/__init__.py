"""The fixed sentences of learner-facing reports, in the learner's language.

    from autograder import messages
    messages.text("case.expected")                 # "expected:" or "期望："
    messages.text("test.title", lab="lab01", name="softmax_is_stable", score=3, max_score=9)
    messages.sentence("Keep the name `softmax` from the stub; ...")   # a fixed hint, translated if known

The language is the `lang` argument, else the COURSE_LANG environment variable (`make lab
LANG=zh` sets it for the Jupyter kernel), else English. Catalogs are JSON files next to this
module: <lang>.json maps message ids to templates (str.format fields such as {lab}); its
"sentences" table maps fixed English hint sentences to their translation. Values that a
template receives (expected, got, numbers, names) are inserted as they are, never translated.
A message id missing from a catalog falls back to English.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANG_ENV = "COURSE_LANG"


@functools.lru_cache(maxsize=None)
def catalog(lang: str) -> dict:
    path = HERE / f"{lang}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def languages() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.json"))


def language(lang: str | None = None) -> str:
    """The language to report in: `lang`, else $COURSE_LANG, else "en" (unknown -> "en")."""
    chosen = (lang or os.environ.get(LANG_ENV) or "en").split("_")[0].split(".")[0].lower()
    return chosen if chosen in languages() else "en"


def text(msg_id: str, lang: str | None = None, **values) -> str:
    """The template `msg_id` in the chosen language, filled with `values`."""
    english = catalog("en")["messages"]
    if msg_id not in english:
        raise KeyError(f"`msg_id` must be one of the message ids in en.json, got {msg_id!r}.")
    template = catalog(language(lang)).get("messages", {}).get(msg_id) or english[msg_id]
    return template.format(**values)


def sentence(english: str, lang: str | None = None) -> str:
    """A fixed English sentence (a hint) in the chosen language, or unchanged if not in the catalog."""
    if english is None:
        return english
    return catalog(language(lang)).get("sentences", {}).get(english, english)
