"""Counts schema passes only among the exact completions, so a well-formed but wrong call is
not counted as well-formed (schema_pass becomes a second count of exact)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"quality_score_counts_exact_and_schema": ["hand_checked_completions",
                                                         "key_order_and_spaces_do_not_matter",
                                                         "tiny_model_readme_completions"]}

_solution_quality_score = quality_score


def quality_score(completions, quality_set):
    score = _solution_quality_score(completions, quality_set)
    score["schema_pass"] = score["exact"]                      # BUG: only the exact ones pass
    return score
