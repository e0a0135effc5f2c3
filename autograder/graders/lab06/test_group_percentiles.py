"""group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)): the hidden cases of the cell
group_percentiles_by_edges. The rows are probes.rows_of(set), read straight from its timelines."""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects, result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import case, must_value_error, same
from .probes import rows_of

pytestmark = pytest.mark.cell("group_percentiles_by_edges",
                              description="group_percentiles: P50/P95/P99 per input-length, output-length or "
                                          "concurrency group")

HINT = ("Group i holds rows with edges[i-1] < value <= edges[i] (the first: value <= edges[0], the last: "
        "value > edges[-1]); skip rows whose metric is None; an empty group has n = 0 and None "
        "percentiles, never 0.")

QS_HINT = ("Compute one percentile per q of `qs` (not always 50, 95 and 99), each under the key \"p\" + "
           "format(q, \"g\"): qs=(25, 99.9) gives \"p25\" and \"p99.9\".")


def row(name, set_name, by, edges, metric, *, qs=None, points=1, visible=False):
    probe = ("groups", set_name, by, edges, metric) + (() if qs is None else (list(qs),))
    return case(name, set_name, by, edges, metric, qs, probe=probe, points=points, visible=visible,
                fixture=set_name)


@pytest.mark.parametrize("name, by, edges, metric, qs", [
    row("ttft_by_input_length", "trace_mixed", "input_tokens", [128, 512, 1024], "ttft", points=2, visible=True),
    row("edges_are_inclusive_above", "trace_mixed", "input_tokens", [100, 129, 513], "e2e", points=2),
    row("empty_group_is_not_zero", "trace_mixed", "input_tokens", [10, 20, 5000], "ttft"),
    row("tpot_skips_one_token_requests", "trace_mixed", "output_tokens", [1, 8, 64], "tpot"),
    row("e2e_by_concurrency", "trace_kv_cache_incident", "concurrency", [2, 4, 8], "e2e"),
    row("percentiles_named_by_qs", "trace_mixed", "input_tokens", [128, 512, 1024], "ttft", qs=[25, 99.9]),
    # q = 0 is a percentile too (each group's smallest value, under "p0")
    row("q_0_is_each_groups_min", "trace_mixed", "input_tokens", [128, 512, 1024], "ttft", qs=[0, 50]),
])
def test_groups(observation, name, by, edges, metric, qs):
    """One dict per group (len(edges) + 1), each with the reference's lo, hi, n and percentiles."""
    more = () if qs is None else (tuple(qs),)
    call = (f"group_percentiles(<rows of {name}>, {by!r}, {list(edges)!r}, {metric!r}"
            + (f", qs={more[0]!r})" if more else ")"))
    got = result_of({"result": observation}, call, HINT)
    expected = ref.group_percentiles(rows_of(name), by, list(edges), metric, *more)
    keys = ("lo", "hi", "n") + tuple(f"p{q:g}" for q in (qs or (50, 95, 99)))
    if not isinstance(got, list) or len(got) != len(expected):
        raise Fail(f"{call} should return one dict per group ({len(expected)} groups for "
                   f"{len(edges)} edges)", expected=len(expected), got=describe(got), hint=HINT)
    for e, g in zip(expected, got):
        if not isinstance(g, dict):
            raise Fail(f"{call}: each group should be a dict", got=describe(g))
        for key in keys:
            if key not in g or not same(e[key], g[key]):
                raise Fail(f"{call}: group ({e['lo']}, {e['hi']}] has the wrong {key!r}", expected=e[key],
                           got=g.get(key, "(missing)"), hint=QS_HINT if qs else HINT)


@pytest.mark.probe("groups", "trace_mixed", "input_tokens", [512, 128], "ttft")
def test_rejects_decreasing_edges(observation):
    """Edges that are not increasing raise ValueError."""
    must_value_error(observation, "edges that are not increasing")
    reference_rejects(ref.group_percentiles, (rows_of("trace_mixed"), "input_tokens", [512, 128], "ttft"), {},
                      "edges [512, 128]")


@pytest.mark.probe("groups", "trace_mixed", "input_tokens", [128, 128, 512], "ttft")
def test_rejects_repeated_edges(observation):
    """Edges must be STRICTLY increasing: a repeated edge raises ValueError."""
    must_value_error(observation, "edges that repeat a value (not strictly increasing)")
    reference_rejects(ref.group_percentiles, (rows_of("trace_mixed"), "input_tokens", [128, 128, 512], "ttft"), {},
                      "edges [128, 128, 512]")
