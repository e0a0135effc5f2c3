"""bucket_counts(values, boundaries) and histogram_percentile(bucket_counts, boundaries, q): the
hidden cases of the cell buckets_and_histogram_percentile."""
from __future__ import annotations

import copy

import pytest

from autograder.checks import reference_rejects, rejects, result_of
from autograder.core import Fail
from autograder.reference import lab06 as ref

from .judging import RECORD, case, records, same

pytestmark = pytest.mark.cell("buckets_and_histogram_percentile",
                              description="bucket_counts with 'le' edges, and percentiles read back from the buckets")

EDGES = [0.1, 0.5, 1.0]
LE_HINT = ("A value v belongs to the first bucket whose upper edge is >= v (Prometheus \"le\"): 0.5 goes in "
           "(0.1, 0.5], not in (0.5, 1.0]. Values above the last edge go to the extra overflow bucket.")
HQ_HINT = ("rank = q/100 * total; find the first non-empty bucket whose cumulative count reaches the rank and "
           "interpolate from its lower edge (0 for the first bucket) to its upper edge; in the overflow bucket "
           "return the last edge.")

HQ_HINT_LE0 = ("When the first edge is <= 0 the first bucket has no lower edge to interpolate from: an answer in "
               "that bucket is boundaries[0] (as Prometheus does); every other bucket interpolates as usual.")


def ints(e, g):
    return isinstance(g, list) and g == e and all(type(x) is int for x in g)


def row(name, fn_name, calls, hint, *, points=1, visible=False):
    """Calls [(label, args)] of fn_name, each judged against the reference on the same args."""
    calls = [[label, list(args)] for label, args in calls]
    return case(name, fn_name, calls, hint, probe=("calls", fn_name, [args for _, args in calls]), points=points,
                visible=visible)


@pytest.mark.parametrize("fn_name, calls, hint", [
    row("counts_per_bucket", "bucket_counts", [("[0.05, 0.3, 0.7, 2.0], edges", ([0.05, 0.3, 0.7, 2.0], EDGES))],
        LE_HINT, visible=True),
    row("value_on_an_edge_is_in_that_bucket", "bucket_counts",
        [("[0.1, 0.5, 1.0], edges", ([0.1, 0.5, 1.0], EDGES)), ("[0.5000001], edges", ([0.5000001], EDGES))],
        LE_HINT, points=2),
    row("overflow_and_empty", "bucket_counts", [("[], edges", ([], EDGES)), ("[7.5], edges", ([7.5], EDGES))],
        LE_HINT),
    row("interpolates_inside_a_bucket", "histogram_percentile",
        [("[0, 4, 0, 0], edges, 50", ([0, 4, 0, 0], EDGES, 50)),
         ("[1, 2, 1, 0], edges, 75", ([1, 2, 1, 0], EDGES, 75))], HQ_HINT, points=2, visible=True),
    row("first_bucket_starts_at_zero", "histogram_percentile", [("[3, 1, 0, 0], edges, 50", ([3, 1, 0, 0], EDGES, 50))],
        HQ_HINT),
    row("overflow_reports_the_last_edge", "histogram_percentile",
        [("[1, 0, 0, 3], edges, 99", ([1, 0, 0, 3], EDGES, 99))], HQ_HINT),
    # [0.2, 0.3] both in (0.1, 0.5]: [0, 2, 1, 0]
    row("two_values_in_one_bucket", "bucket_counts", [("[0.2, 0.3, 0.7], edges", ([0.2, 0.3, 0.7], EDGES))],
        LE_HINT),
    # one edge, two buckets: v <= 0.5 and the overflow; [1, 1]
    row("bucket_counts_with_one_edge", "bucket_counts", [("[0.3, 0.7], [0.5]", ([0.3, 0.7], [0.5]))], LE_HINT),
    # rank 0.5 of 1 in the first bucket [0, 0.5]: 0.25
    row("histogram_with_one_edge", "histogram_percentile", [("[1, 0], [0.5], 50", ([1, 0], [0.5], 50))], HQ_HINT),
    # rank 2.25 of 3: two samples before the third bucket (0.5, 1.0], 0.5 + 0.5 * 0.25 / 1 = 0.625
    row("counts_before_add_up", "histogram_percentile", [("[1, 1, 1, 0], edges, 75", ([1, 1, 1, 0], EDGES, 75))],
        HQ_HINT),
    # a first edge <= 0 (Prometheus): the first bucket answers that edge; the others interpolate as usual
    row("first_edge_at_or_below_zero", "histogram_percentile",
        [("[0, 2, 0, 0], [0.0, 0.5, 1.0], 50", ([0, 2, 0, 0], [0.0, 0.5, 1.0], 50)),      # 0 + 0.5 * 1 / 2 = 0.25
         ("[2, 0, 0, 0], [0.0, 0.5, 1.0], 50", ([2, 0, 0, 0], [0.0, 0.5, 1.0], 50)),      # 0.0
         ("[2, 0, 0, 0], [-1.0, 0.5, 1.0], 50", ([2, 0, 0, 0], [-1.0, 0.5, 1.0], 50))],   # -1.0
        HQ_HINT_LE0),
    row("skips_empty_buckets", "histogram_percentile",
        [("[0, 0, 2, 0], edges, 0", ([0, 0, 2, 0], EDGES, 0)), ("[2, 0, 2, 0], edges, 50", ([2, 0, 2, 0], EDGES, 50))],
        HQ_HINT),
])
def test_buckets(observation, fn_name, calls, hint):
    """Each call's result equals the reference's on the same arguments (counts as a list of ints)."""
    compare = ints if fn_name == "bucket_counts" else same
    for (label, args), rec in zip(calls, records(observation, len(calls), RECORD)):
        call = f"{fn_name}({label})"
        got = result_of(rec, call, hint)
        expected = getattr(ref, fn_name)(*copy.deepcopy(args))
        if not compare(expected, got):
            raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)


@pytest.mark.probe("calls", "histogram_percentile", [[[1, 2, 3], EDGES, 50]])
def test_rejects_counts_of_the_wrong_length(observation):
    """Counts that are not one per bucket (len(boundaries) + 1) raise ValueError naming bucket_counts
    and showing them."""
    rec, = records(observation, 1, RECORD)
    rejects(rec, f"histogram_percentile([1, 2, 3], {EDGES!r}, 50)", "bucket_counts", [1, 2, 3])
    reference_rejects(ref.histogram_percentile, ([1, 2, 3], EDGES, 50), {}, "histogram_percentile([1, 2, 3], ..)")


@pytest.mark.probe("calls", "histogram_percentile", [[[0, 0, 0, 0], EDGES, 50]])
def test_rejects_counts_of_nothing(observation):
    """Counts that count no sample (all zero) raise ValueError naming bucket_counts and showing them:
    an empty histogram has no percentile, not the last edge."""
    rec, = records(observation, 1, RECORD)
    rejects(rec, f"histogram_percentile([0, 0, 0, 0], {EDGES!r}, 50)", "bucket_counts", [0, 0, 0, 0])
    reference_rejects(ref.histogram_percentile, ([0, 0, 0, 0], EDGES, 50), {},
                      "histogram_percentile([0, 0, 0, 0], ..)")
