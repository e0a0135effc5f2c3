"""lab04's quality-set inputs, shared by the probes (the student's process) and the tests
(the grading process): hand-checkable completions and scores, no reference."""
from __future__ import annotations

from course.tiny_model import TOOL_CALL_PROMPTS

NAN = float("nan")


# The inputs are hand-checkable completions (never a live model run): a small set of four
# items of course.quality's set, and the tiny model's own greedy completions of all sixteen
# as datasets/tiny-model/README.md lists them (10 exact, 16 well-formed).

def _small_set() -> dict:
    from course.quality import quality_set
    qs = quality_set()
    qs["items"] = [qs["items"][i] for i in (0, 6, 8, 10)]   # Paris weather, 250 USD, 15-minute timer, 12 * 7
    return qs


def _full_set() -> dict:
    from course.quality import quality_set
    return quality_set()


QUALITY_SETS = {"small": _small_set, "full": _full_set}
P = list(TOOL_CALL_PROMPTS)          # the sixteen prompts of the quality set, in its order
PARIS, USD, TIMER, TIMES = P[0], P[6], P[8], P[10]
ROME = "User: weather in Rome\nCall: "    # not a prompt of the set

README_COMPLETIONS = [
    '{"tool": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}',
    '{"tool": "get_weather", "args": {"city": "Tokyo", "unit": "fahrenheit"}}',
    '{"tool": "get_weather", "args": {"city": "Lisbon", "unit": "celsius"}}',
    '{"tool": "get_weather", "args": {"city": "Nairobi", "unit": "celsius"}}',
    '{"tool": "get_time", "args": {"city": "London"}}',
    '{"tool": "get_time", "args": {"city": "Seoul"}}',
    '{"tool": "convert_currency", "args": {"amount": 133, "from": "GBP", "to": "EUR"}}',
    '{"tool": "convert_currency", "args": {"amount": 12, "from": "GBP", "to": "GBP"}}',
    '{"tool": "set_timer", "args": {"minutes": 11}}',
    '{"tool": "set_timer", "args": {"minutes": 11}}',
    '{"tool": "calculator", "args": {"expression": "111 * 22"}}',
    '{"tool": "calculator", "args": {"expression": "263 - 47"}}',
    '{"tool": "send_message", "args": {"to": "Alice", "text": "running late"}}',
    '{"tool": "send_message", "args": {"to": "Bob", "text": "see you at noon"}}',
    '{"tool": "get_weather", "args": {"city": "Oslo", "unit": "fahrenheit"}}',
    '{"tool": "get_time", "args": {"city": "Toronto"}}',
]

# quality_score: case -> [(quality set, completions), ...] (one row each, judged in turn)
QUALITY = {
    "hand_checked_completions": [("small", {
        PARIS: '{"tool": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}',             # exact
        USD: '{"tool": "convert_currency", "args": {"amount": 133, "from": "GBP", "to": "EUR"}}',  # valid, wrong
        TIMER: '{"tool": "set_timer", "args": {"minutes": 1',                                     # cut off
        TIMES: '{"tool": "calculator", "args": {"expr": "12 * 7"}}',                               # not the schema
    })],
    "key_order_and_spaces_do_not_matter": [("small", {
        PARIS: '{"args": {"unit": "celsius", "city": "Paris"}, "tool": "get_weather"}',
        USD: ' {"tool":"convert_currency","args":{"amount":250,"from":"USD","to":"EUR"}}\n',
        TIMER: '{"tool": "set_timer", "args": {"minutes": 51}}',
        TIMES: '{"tool": "calculator", "args": {"expression": "12*7"}}',
    })],
    "tiny_model_readme_completions": [("full", dict(zip(P, README_COMPLETIONS)))],
    "json_that_is_not_one_call": [("small", {
        PARIS: '"get_weather"',
        USD: '[{"tool": "convert_currency", "args": {"amount": 250, "from": "USD", "to": "EUR"}}]',
        TIMER: "null",
        TIMES: '{"tool": "calculator", "args": {"expression": "12 * 7"}} {"tool"',
    }), ("small", {                                  # the first text is not JSON: the items after it still count
        PARIS: '{"tool": "get_weather", "args": {"city": "Par',                                   # cut off
        USD: '{"tool": "convert_currency", "args": {"amount": 250, "from": "USD", "to": "EUR"}}',  # exact
        TIMER: '{"tool": "set_timer", "args": {"minutes": 11}}',                                  # valid, wrong
        TIMES: '"12 * 7"',                                                                         # not a call
    })],
}

_RIGHT = {PARIS: QUALITY["key_order_and_spaces_do_not_matter"][0][1][PARIS], USD: README_COMPLETIONS[6],
          TIMER: README_COMPLETIONS[8], TIMES: README_COMPLETIONS[10]}

# quality_score rejections: case -> [(param, shown value or None, quality set, completions)]
QUALITY_BAD = {
    "rejects_missing_prompt": [("completions", TIMER, "small", {p: t for p, t in _RIGHT.items() if p != TIMER})],
    "rejects_unknown_prompt": [("completions", ROME, "small", {**_RIGHT, ROME: README_COMPLETIONS[0]})],
    "rejects_bad_completions": [("completions", None, "small", {**_RIGHT, USD: None}),
                                ("completions", None, "small", list(_RIGHT.values()))],
    "rejects_empty_quality_set": [("quality_set", None, "empty", {}), ("quality_set", None, "no_items", {})],
}


def _score(exact_idx, schema_pass_count, n=16) -> dict:
    return {"n": n, "exact": len(exact_idx) / n, "schema_pass": schema_pass_count / n,
            "exact_prompts": [P[i] for i in sorted(exact_idx)]}


README_EXACT = (0, 1, 2, 3, 4, 5, 12, 13, 14, 15)
_BASE = _score(README_EXACT, 16)

# regressed: case -> [(baseline, candidate, tolerance), ...] (one row each, judged in turn)
REGRESS = {
    "drop_beyond_tolerance_regresses": [(_BASE, _score(set(README_EXACT) - {12, 13}, 16), 0.0625)],
    "drop_equal_to_tolerance_is_allowed": [(_BASE, _score(set(README_EXACT) - {4}, 16), 0.0625),
                                           # tolerance 1 is in [0, 1]: even a fall from every prompt to none
                                           (_score(range(4), 4, n=4), _score((), 0, n=4), 1.0)],
    "absolute_not_relative_drop": [(_score((0, 1, 2, 3), 16), _score((0, 1, 2), 16), 0.1)],
    "schema_pass_drop_regresses": [(_BASE, _score(README_EXACT, 14), 0.0625)],
    "lost_prompts_listed_within_tolerance": [(_BASE, _score(set(README_EXACT) - {0} | {6}, 16), 0.0)],
    "improvement_never_regresses": [(_score(set(README_EXACT) - {12, 13}, 14), _BASE, 0.0)],
}

# regressed rejections: case -> [(param, shown value, baseline, candidate, tolerance)]
REGRESS_BAD = {
    "rejects_bad_tolerance": [("tolerance", t, _BASE, _BASE, t) for t in (-0.1, 1.5, NAN, True)],
    "rejects_scores_of_different_sets": [("candidate", 4, _BASE, _score((0, 1), 4, n=4), 0.0625)],
    "rejects_a_score_without_its_keys": [   # shown None: the message need only name the parameter
        ("baseline", None, {k: v for k, v in _BASE.items() if k != "exact_prompts"}, _BASE, 0.0625),
        ("candidate", None, _BASE, {k: v for k, v in _BASE.items() if k != "schema_pass"}, 0.0625),
        ("candidate", None, _BASE, [_BASE["exact"], _BASE["schema_pass"]], 0.0625),
    ],
}


def _quality_set(name):
    if name == "empty":
        return {"schema": _full_set()["schema"], "items": []}
    if name == "no_items":                     # a set with its "items" key left out
        return {"schema": _full_set()["schema"]}
    return QUALITY_SETS[name]()
