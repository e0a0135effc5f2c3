"""percentile(values, q): the hidden cases of the cell percentile_type_6."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects, rejects, result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import RECORD, case, records, same

pytestmark = pytest.mark.cell("percentile_type_6",
                              description="percentile: the exact type-6 percentile (numpy method='weibull')")

TYPE6 = ("Type 6: rank h = (n + 1) * q / 100 (1-based); below 1 -> the smallest value, at or above n -> the "
         "largest; otherwise interpolate between the values at ranks floor(h) and floor(h) + 1.")
TWENTY = [0.05 * i for i in range(20, 0, -1)]       # 1.0, 0.95, ..., 0.05 (unsorted)


def row(name, values, q, *, points=1, visible=False):
    return case(name, values, q, probe=("percentile_of", values, q), points=points, visible=visible)


@pytest.mark.parametrize("values, q", [
    row("median_of_five", [5.0, 1.0, 4.0, 2.0, 3.0], 50, visible=True),
    row("interpolates_between_ranks", [0.1, 0.2, 0.4, 0.8, 1.6], 30, points=2),
    row("p90_of_twenty_interpolates", TWENTY, 90, points=2),
    row("p99_of_twenty_is_the_max", TWENTY, 99),
    row("p1_of_twenty_is_the_min", TWENTY, 1),
    row("ties", [0.3, 0.3, 0.3, 0.9], 50),
    row("one_sample", [0.42], 95),
    row("q_0_and_100_are_min_and_max", [2.0, 9.0, 4.0], 100),
    row("q_0_is_the_min", [2.0, 9.0, 4.0], 0),                  # h = 0: the smallest value, 2.0
    row("rank_exactly_n_is_the_max", [2.0, 9.0, 4.0], 75),      # h = 4 * 0.75 = 3 = n: the largest, 9.0
])
def test_percentile(observation, values, q):
    """The type-6 percentile of the values, with the caller's list left in its order."""
    call = f"percentile({values!r}, {q!r})"
    if not (isinstance(observation, dict) and "result" in observation and "unchanged" in observation):
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    got = result_of(observation, call, TYPE6)
    expected = ref.percentile(list(values), q)
    if not same(expected, got):
        raise Fail(f"{call} is wrong", expected=expected, got=got, hint=TYPE6)
    if not observation["unchanged"]:
        raise Fail(f"{call} reordered the list it was given",
                   hint="Sort a copy (sorted(values)), never the caller's list in place.")


NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def bad_row(name, *calls, probe="calls"):
    """Calls (param, args) that must raise ValueError naming `param` and showing the value it got
    (checks.rejects: the value in any reasonable form, as every lab asks)."""
    args = [list(a) for _, a in calls]
    return case(name, [[param, a] for param, a in calls],
                probe=("calls", "percentile", args) if probe == "calls" else (probe, *args[0]))


@pytest.mark.parametrize("bad", [
    bad_row("rejects_empty_values", ("values", [[], 50])),
    bad_row("rejects_q_out_of_range", ("q", [[1.0, 2.0], 101]), ("q", [[1.0, 2.0], -1])),
    bad_row("rejects_non_finite_values", ("values", [[1.0, "nan", 3.0], 50]), probe="percentile_non_finite"),
])
def test_percentile_rejects(observation, bad):
    """Empty or non-finite values, or q outside [0, 100], raise ValueError naming the parameter and
    showing the value it got."""
    for (param, (values, q)), rec in zip(bad, records(observation, len(bad), RECORD)):
        values = [NON_FINITE.get(v, v) if isinstance(v, str) else v for v in values]
        rejects(rec, f"percentile({values!r}, {q!r})", param, values if param == "values" else q)
        reference_rejects(ref.percentile, (values, q), {}, f"percentile({values!r}, {q!r})")
