"""Counts a drop of exactly the tolerance as a regression (`>=` where the contract says more than)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"regressed_decides_with_tolerance": ["drop_equal_to_tolerance_is_allowed",
                                                    "lost_prompts_listed_within_tolerance"]}


def regressed(baseline, candidate, *, tolerance):
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise ValueError(f"`tolerance` must be a number in [0, 1], got {tolerance!r}.")
    for name, score in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(score, dict) or any(k not in score for k in ("n", "exact", "schema_pass", "exact_prompts")):
            raise ValueError(f"`{name}` must be a score from quality_score (a dict with n, exact, schema_pass and "
                             f"exact_prompts), got {score!r}.")
    if candidate["n"] != baseline["n"]:
        raise ValueError(f"`candidate` must be scored on the baseline's quality set of n={baseline['n']}, "
                         f"got n={candidate['n']!r}.")
    too_far = [m for m in ("exact", "schema_pass") if baseline[m] - candidate[m] >= tolerance]   # BUG: >=
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    reason = "; ".join(f"{m} dropped from {baseline[m]:.3f} to {candidate[m]:.3f} (tolerance {tolerance})"
                       for m in too_far) or f"no rate dropped by more than {tolerance}"
    if lost:
        reason += "; no longer exact: " + ", ".join(repr(p) for p in lost)
    return bool(too_far), reason
