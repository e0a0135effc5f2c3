"""abort_request (cancellation reaches the engine): the hidden cases of the cell abort_frees_blocks_now."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail

from .judging import case, data, expected, per_request, pool_full_at_end, rows_per_step, same_requests

pytestmark = pytest.mark.cell("abort_frees_blocks_now",
                              description="abort() frees the request's blocks before it returns")


@pytest.mark.parametrize("k", [
    case("abort_after_two_steps", 2, probe=("trace", "abort_after_2"), visible=True),
    *(case(f"abort_after_{k}_steps", k, probe=("trace", f"abort_after_{k}")) for k in (0, 1, 4)),
])
def test_abort_a_running_request(observation, k):
    """abort() after k steps: no block held when it returns, no output after, the other request unharmed."""
    with one_thread():
        obs = data(observation)
        if obs["abort_blocks"].get("p3"):
            raise Fail(f"abort() after {k} step(s) returned while the request still held "
                       f"{obs['abort_blocks']['p3']} KV block(s)", expected=0, got=obs["abort_blocks"]["p3"],
                       hint="abort() must release the cache itself, not only mark the request.")
        got, want = per_request(obs), per_request(expected(f"abort_after_{k}"))
        g, w = got.get("p3", {"tokens": []}), want.get("p3", {"tokens": []})
        if g["tokens"] != w["tokens"] or g.get("finish") is not None:
            raise Fail(f"outputs of the request aborted after {k} step(s) differ (no output may follow abort)",
                       expected=w["tokens"], got=g["tokens"], hint="After abort(), step() says nothing more about it.")
        same_requests(obs, f"abort_after_{k}", ("tokens", "finish"), names=["p7"])
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "waiting_abort")
def test_abort_a_waiting_request(observation):
    """A request aborted while it waits never runs; the running one ends as usual."""
    with one_thread():
        obs = data(observation)
        if "p7" in per_request(obs) or any(row[0] == "p7" for call in obs["log"] for row in call):
            raise Fail("request 'p7' was aborted while waiting but still ran or produced output",
                       hint="An aborted waiting request leaves the queue at once and never runs.")
        same_requests(obs, "waiting_abort", names=["p3"])
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "late_abort")
def test_late_abort_is_ignored(observation):
    """abort() of a request that has already ended changes nothing."""
    with one_thread():
        same_requests(observation, "late_abort")


@pytest.mark.probe("trace", "abort_preempted")
def test_abort_a_preempted_request(observation):
    """A request aborted while it waits after a preemption (it holds no cache) ends at once; the others run on."""
    with one_thread():
        obs = data(observation)
        if "p7" in per_request(obs) and per_request(obs)["p7"]["finish"] is not None:
            raise Fail("request 'p7' was aborted while waiting after its preemption but got a final output",
                       hint="After abort(), step() says nothing more about it.")
        if any(row[0] == "p7" for rows in rows_per_step(obs)[10:] for row in rows):
            raise Fail("request 'p7' was aborted while waiting after its preemption but still ran",
                       hint="A preempted request waits without a cache (req.cache is None): abort it like any "
                            "waiting request.")
        same_requests(obs, "abort_preempted", names=["p3", "p6"])
        pool_full_at_end(obs)
