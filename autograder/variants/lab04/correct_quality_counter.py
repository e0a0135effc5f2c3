"""A correct quality_score and regressed in another style: the checks of a completion as a
table of outcomes counted with collections.Counter, set arithmetic for the prompts, and a
regression reason assembled from a dict of drops."""
import json
from collections import Counter

import jsonschema

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


def _outcome(text, expected, schema):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return set()
    found = set()
    if not list(jsonschema.Draft202012Validator(schema).iter_errors(value)):
        found.add("schema_pass")
    if value == expected:
        found.add("exact")
    return found


def quality_score(completions, quality_set):
    items = quality_set.get("items") if type(quality_set) is dict else None
    if not items:
        raise ValueError(f"`quality_set` needs a non-empty list of items, got {quality_set!r}.")
    if type(completions) is not dict:
        raise ValueError(f"`completions` must be a dict of prompt -> text, got {type(completions).__name__}.")
    wanted = [it["prompt"] for it in items]
    if set(wanted) - set(completions):
        raise ValueError(f"`completions` is missing {sorted(set(wanted) - set(completions))}.")
    if set(completions) - set(wanted):
        raise ValueError(f"`completions` has prompts outside the set: {sorted(set(completions) - set(wanted))}.")
    if any(type(completions[p]) is not str for p in wanted):
        raise ValueError(f"`completions` must hold str values, got {[type(completions[p]).__name__ for p in wanted]}.")
    counts, exact = Counter(), []
    for it in items:
        found = _outcome(completions[it["prompt"]], it["expected"], quality_set["schema"])
        counts.update(found)
        if "exact" in found:
            exact.append(it["prompt"])
    n = len(items)
    return {"n": n, "exact": counts["exact"] / n, "schema_pass": counts["schema_pass"] / n, "exact_prompts": exact}


def regressed(baseline, candidate, *, tolerance):
    if type(tolerance) not in (int, float) or not (0 <= tolerance <= 1):
        raise ValueError(f"`tolerance` must be within [0, 1], got {tolerance}.")
    for name, score in {"baseline": baseline, "candidate": candidate}.items():
        if type(score) is not dict or not {"n", "exact", "schema_pass", "exact_prompts"} <= score.keys():
            raise ValueError(f"`{name}` is not a quality_score result: {score!r}.")
    if baseline["n"] != candidate["n"]:
        raise ValueError(f"`candidate` has n={candidate['n']} but the baseline has n={baseline['n']}.")
    drops = {m: baseline[m] - candidate[m] for m in ("exact", "schema_pass")}
    bad = {m: d for m, d in drops.items() if d > tolerance}
    lost = [p for p in baseline["exact_prompts"] if p not in set(candidate["exact_prompts"])]
    words = [f"{m} -{d:.4f} > {tolerance}" for m, d in bad.items()] + [f"lost {p!r}" for p in lost]
    return (len(bad) > 0, ", ".join(words) or "within tolerance")
