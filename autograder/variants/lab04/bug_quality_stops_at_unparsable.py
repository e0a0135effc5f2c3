"""Puts the try around the whole loop, so the first completion json.loads rejects ends the count:
the items after it are never scored (neither exact nor passing, even when they are)."""
import json

import jsonschema

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"quality_score_counts_exact_and_schema": ["json_that_is_not_one_call"]}

_solution_quality_score = quality_score


def quality_score(completions, quality_set):
    _solution_quality_score(completions, quality_set)           # the solution's checks, unchanged
    items = quality_set["items"]
    validator = jsonschema.Draft202012Validator(quality_set["schema"])
    exact_prompts, passing = [], 0
    try:                                                         # BUG: one try for every item
        for item in items:
            value = json.loads(completions[item["prompt"]])
            passing += validator.is_valid(value)
            if value == item["expected"]:
                exact_prompts.append(item["prompt"])
    except ValueError:
        pass
    n = len(items)
    return {"n": n, "exact": len(exact_prompts) / n, "schema_pass": passing / n, "exact_prompts": exact_prompts}
