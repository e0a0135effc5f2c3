"""The performance grade: hidden cases of the cell engine_runs_each_request_as_if_alone.

One fixed workload runs through the student's engine on the cost model (performance.py: the
workload's figures replayed from the Watch's log, and the reference engine's). An engine
within MAKESPAN_MARGIN of the reference's makespan and TTFT_MARGIN of its P95 TTFT earns the
points, and one that beats it earns them too. Both cases keep the figures (the student's and
the reference's) as their `got`: the class CSV and `python -m autograder leaderboard` read them.
"""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail

from .performance import FIGURES, MAKESPAN_MARGIN, TTFT_MARGIN, ImpossibleLog, figures, reference_figures

pytestmark = pytest.mark.cell("engine_runs_each_request_as_if_alone",
                              description="continuous batching changes no request's tokens")

def _judge(request, observation, figure, margin, hint):
    """Fail unless `figure` is within `margin` times the reference's; either way the case keeps
    the figures (the student's and the reference's) as its `got`, for the class CSV and the
    leaderboard (autograder/leaderboard.py)."""
    with one_thread():
        try:
            got = figures(observation)
        except ImpossibleLog as e:       # no points, no figures (no leaderboard rank), and a flag for review
            request.node.user_properties.append(("review", e.message))
            raise
        want = reference_figures()
        measured = {**got, **{f"reference_{k}": want[k] for k in FIGURES}}
        request.node.user_properties.append(("got", measured))
        if got[figure] > margin * want[figure]:
            raise Fail(f"on the performance workload your engine's {figure} is {got[figure]:.4f} s, more than "
                       f"{margin:g}x the reference engine's {want[figure]:.4f} s",
                       expected=f"<= {margin * want[figure]:.4f}", got=measured, hint=hint)


@pytest.mark.probe("workload")
@pytest.mark.cell(points=2)
def test_makespan_within_margin_of_the_reference(request, observation):
    """The workload ends within 1.10x the reference engine's makespan (tokens equal the solo runs)."""
    _judge(request, observation, "makespan", MAKESPAN_MARGIN,
           "Keep the batch full: admit every waiting request that fits in each step (within max_batch, the "
           "block budget and the watermark), and run all of them in one forward pass.")


@pytest.mark.probe("workload")
@pytest.mark.cell(points=2)
def test_p95_ttft_within_margin_of_the_reference(request, observation):
    """The workload's P95 TTFT is within 1.25x the reference engine's."""
    _judge(request, observation, "ttft_p95", TTFT_MARGIN,
           "A waiting request's first token waits for its admission: admit as many requests per step as fit, "
           "and preempt only when the running requests' next tokens do not fit.")
