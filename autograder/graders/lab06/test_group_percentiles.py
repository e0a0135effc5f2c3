"""group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)): the hidden cases of the cell
group_percentiles_by_edges. The rows are probes.rows_of(set), read straight from its timelines."""
from __future__ import annotations

import pytest

from autograder.checks import result_of
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


def row(name, set_name, by, edges, metric, *, points=1, visible=False):
    return case(name, set_name, by, edges, metric, probe=("groups", set_name, by, edges, metric), points=points,
                visible=visible, fixture=set_name)


@pytest.mark.parametrize("name, by, edges, metric", [
    row("ttft_by_input_length", "trace_mixed", "input_tokens", [128, 512, 1024], "ttft", points=2, visible=True),
    row("edges_are_inclusive_above", "trace_mixed", "input_tokens", [100, 129, 513], "e2e", points=2),
    row("empty_group_is_not_zero", "trace_mixed", "input_tokens", [10, 20, 5000], "ttft"),
    row("tpot_skips_one_token_requests", "trace_mixed", "output_tokens", [1, 8, 64], "tpot"),
    row("e2e_by_concurrency", "trace_kv_cache_incident", "concurrency", [2, 4, 8], "e2e"),
])
def test_groups(observation, name, by, edges, metric):
    """One dict per group (len(edges) + 1), each with the reference's lo, hi, n and percentiles."""
    call = f"group_percentiles(<rows of {name}>, {by!r}, {list(edges)!r}, {metric!r})"
    got = result_of({"result": observation}, call, HINT)
    expected = ref.group_percentiles(rows_of(name), by, list(edges), metric)
    if not isinstance(got, list) or len(got) != len(expected):
        raise Fail(f"{call} should return one dict per group ({len(expected)} groups for "
                   f"{len(edges)} edges)", expected=len(expected), got=describe(got), hint=HINT)
    for e, g in zip(expected, got):
        if not isinstance(g, dict):
            raise Fail(f"{call}: each group should be a dict", got=describe(g))
        for key in ("lo", "hi", "n", "p50", "p95", "p99"):
            if key not in g or not same(e[key], g[key]):
                raise Fail(f"{call}: group ({e['lo']}, {e['hi']}] has the wrong {key!r}", expected=e[key],
                           got=g.get(key, "(missing)"), hint=HINT)


@pytest.mark.probe("groups", "trace_mixed", "input_tokens", [512, 128], "ttft")
def test_rejects_decreasing_edges(observation):
    """Edges that are not increasing raise ValueError."""
    must_value_error(observation, "edges that are not increasing")
