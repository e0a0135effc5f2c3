"""Defaults atol to 0.0 instead of the signature's 1e-5, so, called without atol, float noise
below 1e-5 counts as a change."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"changed_positions_shows_causality": ["default_atol_when_none_is_passed"]}

_solution_changed_positions = changed_positions


def changed_positions(model, input_ids, other_ids, atol=0.0):   # BUG: the default is 1e-5
    return _solution_changed_positions(model, input_ids, other_ids, atol)
