"""filter_logits(logits, *, temperature, top_k, top_p): the hidden cases of the cell pipeline_matches_transformers."""
from __future__ import annotations

import pytest
import torch

from autograder.core import Fail
from autograder.reference import lab02 as ref

from .judging import case, judge_filtered, judge_invalid

pytestmark = pytest.mark.cell("pipeline_matches_transformers", points=1,
                              description="filter_logits equals transformers' Temperature -> TopK -> TopP warpers")

PIPE_HINT = ("Apply temperature first (logits / T), then top_k_filter, then top_p_filter on the result; skip "
             "top-k when top_k is None and top-p when top_p == 1.")


def row(name, hint=PIPE_HINT, *, visible=False, fixture=None):
    return case(name, f"pipeline/{name}", hint, probe=("filtered", "filter_logits", f"pipeline/{name}"),
                visible=visible, fixture=fixture, hint=hint)


def _pipeline(x, **kwargs):
    """transformers' warpers; course.sampling's filter_logits (what later labs sample with) must keep
    the same tokens (grader integrity, like checks.reference_rejects for the rejected parameters)."""
    expected = ref.transformers_pipeline(x, **kwargs)
    try:
        course_kept = torch.isfinite(ref.filter_logits(x, **kwargs))
    except ValueError as e:
        raise Fail(f"grader error: the reference rejects filter_logits({kwargs}): {e}",
                   hint="This is a fault in the grader, not in your code: tell the course staff.") from None
    if not torch.equal(course_kept, torch.isfinite(expected)):
        raise Fail(f"grader error: the reference and transformers keep different tokens for filter_logits({kwargs})",
                   hint="This is a fault in the grader, not in your code: tell the course staff.")
    return expected


@pytest.mark.parametrize("key, hint", [
    row("long_tail_t07_k5_p09", visible=True, fixture="long_tail"),
    row("fixtures_several_settings"),
    row("random_logits_batches"),
    row("top_k_before_top_p", "Order matters: top-k first, then top-p renormalises over the k survivors "
        "(0.4/0.7 = 0.57 already reaches 0.5, so one token is left)."),
    row("temperature_before_filters", "Temperature changes which tokens reach top_p: divide the logits by T BEFORE "
        "filtering.", fixture="long_tail"),
    row("knobs_off_keep_distribution", "With temperature=1, top_k=None, top_p=1 nothing is removed: softmax of the "
        "result must equal softmax of the input."),
])
def test_pipeline(observation, key, hint):
    """softmax of the result equals softmax of transformers' Temperature -> TopK -> TopP warpers."""
    judge_filtered(observation, "filter_logits", key, _pipeline, hint, compare="probs")


INVALID_HINT = ("Validate all three up front: `temperature` a finite number > 0, `top_k` None or an int >= 1, "
                "`top_p` in (0, 1]; each error names the parameter and shows the value.")


@pytest.mark.probe("invalid", "filter_logits", "pipeline/invalid_parameters_rejected")
@pytest.mark.cell(hint=INVALID_HINT)
def test_invalid_parameters_rejected(observation):
    """A bad temperature, top_k or top_p raises ValueError naming it and showing the value."""
    judge_invalid(observation, "filter_logits", "pipeline/invalid_parameters_rejected", INVALID_HINT)


@pytest.mark.probe("filtered", "filter_logits", "pipeline/input_not_modified")
@pytest.mark.cell(hint=PIPE_HINT)
def test_input_not_modified(observation):
    """The input keeps its values."""
    judge_filtered(observation, "filter_logits", "pipeline/input_not_modified", _pipeline, PIPE_HINT, compare="probs")
