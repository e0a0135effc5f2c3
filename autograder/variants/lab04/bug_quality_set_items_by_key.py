"""Reads quality_set["items"] without checking the key is there, so a set with its items left
out raises KeyError instead of the ValueError naming `quality_set`."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"quality_score_counts_exact_and_schema": ["rejects_empty_quality_set"]}

_solution_quality_score = quality_score


def quality_score(completions, quality_set):
    if not quality_set["items"]:                                 # BUG: KeyError when "items" is left out
        raise ValueError(f"`quality_set` must hold at least one item, got {quality_set!r}.")
    return _solution_quality_score(completions, quality_set)
