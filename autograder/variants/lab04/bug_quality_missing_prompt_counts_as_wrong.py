"""Scores a prompt with no completion as a wrong answer instead of refusing the run, and
ignores completions of prompts that are not in the set."""
import json

import jsonschema

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"quality_score_counts_exact_and_schema": ["rejects_missing_prompt", "rejects_unknown_prompt"]}


def quality_score(completions, quality_set):
    if not isinstance(quality_set, dict) or not quality_set.get("items"):
        raise ValueError(f"`quality_set` must hold at least one item, got {quality_set!r}.")
    if not isinstance(completions, dict):
        raise ValueError(f"`completions` must be a dict, got {type(completions).__name__}.")
    validator = jsonschema.Draft202012Validator(quality_set["schema"])
    exact_prompts, passing = [], 0
    for item in quality_set["items"]:
        text = completions.get(item["prompt"], "")             # BUG: a missing prompt is just wrong
        if not isinstance(text, str):
            raise ValueError(f"`completions` must map each prompt to a str, got {text!r}.")
        try:
            value = json.loads(text)
        except ValueError:
            continue
        passing += validator.is_valid(value)
        if value == item["expected"]:
            exact_prompts.append(item["prompt"])
    n = len(quality_set["items"])
    return {"n": n, "exact": len(exact_prompts) / n, "schema_pass": passing / n, "exact_prompts": exact_prompts}
