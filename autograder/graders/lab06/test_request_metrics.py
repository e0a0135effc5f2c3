"""request_metrics(spans): the hidden cases of the cell request_metrics_from_spans.

The probe builds each request's spans with probes.build_spans; the expected metrics are the
reference's on the same spans.
"""
from __future__ import annotations

import pytest

from autograder.checks import reference_rejects, result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import case, must_value_error, records, same
from .probes import METRIC_KEYS, build_spans, stages_only

pytestmark = pytest.mark.cell("request_metrics_from_spans",
                              description="request_metrics: queue, prefill, TTFT from arrival, TPOT over n - 1 gaps, "
                                          "ITL, e2e, tokens")

HINTS = {
    "ttft": "TTFT = first token time - ARRIVAL (the root span's start), queue included; None without tokens.",
    "tpot": "TPOT = (last token - first token) / (n - 1); None for fewer than two tokens.",
    "itl": "ITL is the list of the n - 1 gaps between consecutive token times.",
    "queue": "queue / prefill: the summed durations of those stage spans; None if the request never reached it.",
    "prefill": "queue / prefill: the summed durations of those stage spans; None if the request never reached it.",
    "e2e": "e2e = the root span's end - its start.",
    "output_tokens": "output_tokens = the number of \"token\" events on the root.",
}
ALL_MIXED = [f"r{i:02d}" for i in range(40)]


def row(name, set_name, ids, keys=METRIC_KEYS, *, points=1, visible=False):
    return case(name, set_name, ids, list(keys), probe=("metrics", set_name, ids), points=points, visible=visible,
                fixture=set_name)


@pytest.mark.parametrize("name, ids, keys", [
    row("stop_request", "trace_paths", ["r00"], points=2, visible=True),
    row("ttft_includes_the_queue", "trace_queue_cancel", ["r02", "r03", "r04"], ("queue", "ttft"), points=2),
    row("tpot_over_n_minus_1_gaps", "trace_baseline", ["r00", "r05", "r11"], ("tpot", "itl"), points=2),
    row("one_token_has_no_tpot", "trace_paths", ["r07"]),
    row("no_token_no_ttft", "trace_paths", ["r02", "r05"]),
    row("cancelled_in_queue_never_prefilled", "trace_queue_cancel", ["r05"]),
    row("every_request_of_the_mixed_set", "trace_mixed", ALL_MIXED, points=2),
])
def test_metrics_of_each_request(observation, name, ids, keys):
    """Each request's metrics equal the reference's on its spans, key by key."""
    for rid, got in zip(ids, records(observation, len(ids))):
        got = result_of({"result": got}, f"request_metrics(<spans of {rid}>)")
        expected = ref.request_metrics(build_spans(name, {rid}))
        if not isinstance(got, dict):
            raise Fail("request_metrics should return a dict", expected=sorted(expected), got=describe(got))
        for key in keys:
            if key not in got:
                raise Fail(f"the result has no key {key!r}", expected=sorted(expected), got=sorted(got))
            if not same(expected[key], got[key]):
                raise Fail(f"`{key}` of request {rid!r} is wrong", expected=expected[key], got=got[key],
                           hint=HINTS[key])


@pytest.mark.probe("metrics_two")
def test_rejects_spans_of_two_requests(observation):
    """The spans of two requests raise ValueError: request_metrics measures one request."""
    must_value_error(observation, "the spans of two requests")
    reference_rejects(ref.request_metrics, (build_spans("trace_paths", {"r00", "r01"}),), {},
                      "the spans of two requests")


@pytest.mark.probe("metrics_no_root")
@pytest.mark.cell(fixture="trace_paths")
def test_rejects_spans_without_a_root(observation):
    """Stage spans without their root raise ValueError: there is no request to measure."""
    must_value_error(observation, "spans without a root span")
    reference_rejects(ref.request_metrics, (stages_only("trace_paths", "r00"),), {}, "spans without a root span")
