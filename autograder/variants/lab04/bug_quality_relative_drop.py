"""Measures the drop relative to the baseline's rate (25% of 0.25) instead of as an absolute
difference of rates, so a small rate regresses on a drop the tolerance allows."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"regressed_decides_with_tolerance": ["absolute_not_relative_drop"]}


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
    too_far = [m for m in ("exact", "schema_pass")
               if baseline[m] and (baseline[m] - candidate[m]) / baseline[m] > tolerance]   # BUG: relative
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    reason = "; ".join(f"{m} dropped from {baseline[m]:.3f} to {candidate[m]:.3f} (tolerance {tolerance})"
                       for m in too_far) or f"no rate dropped by more than {tolerance}"
    if lost:
        reason += "; no longer exact: " + ", ".join(repr(p) for p in lost)
    return bool(too_far), reason
