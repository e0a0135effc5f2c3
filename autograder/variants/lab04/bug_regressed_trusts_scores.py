"""Trusts both scores to be quality_score's dicts: a score without one of its keys ends in a
KeyError (or a TypeError for a list) instead of the ValueError naming `baseline` / `candidate`."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"regressed_decides_with_tolerance": ["rejects_a_score_without_its_keys"]}


def regressed(baseline, candidate, *, tolerance):
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise ValueError(f"`tolerance` must be a number in [0, 1], got {tolerance!r}.")
    # BUG: neither score is checked for quality_score's keys
    if candidate["n"] != baseline["n"]:
        raise ValueError(f"`candidate` must be scored on the baseline's quality set of n={baseline['n']}, "
                         f"got n={candidate['n']!r}.")
    too_far = [m for m in ("exact", "schema_pass") if baseline[m] - candidate[m] > tolerance]
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    reason = "; ".join(f"{m} dropped from {baseline[m]:.3f} to {candidate[m]:.3f} (tolerance {tolerance})"
                       for m in too_far) or f"no rate dropped by more than {tolerance}"
    if lost:
        reason += "; no longer exact: " + ", ".join(repr(p) for p in lost)
    return bool(too_far), reason
