"""Rejects tolerance = 1, the closed end of [0, 1] the contract allows (`< 1` where it says `<= 1`)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"regressed_decides_with_tolerance": ["drop_equal_to_tolerance_is_allowed"]}

_solution_regressed = regressed


def regressed(baseline, candidate, *, tolerance):
    if isinstance(tolerance, (int, float)) and tolerance == 1:   # BUG: [0, 1) instead of [0, 1]
        raise ValueError(f"`tolerance` must be a number in [0, 1), got {tolerance!r}.")
    return _solution_regressed(baseline, candidate, tolerance=tolerance)
