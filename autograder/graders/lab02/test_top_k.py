"""top_k_filter(logits, top_k): the hidden cases of the cell top_k_keeps_k_largest."""
from __future__ import annotations

import pytest

from autograder.reference import lab02 as ref

from .judging import case, judge_filtered, judge_invalid

pytestmark = pytest.mark.cell("top_k_keeps_k_largest", points=1,
                              description="top_k_filter keeps the k largest logits of every row")

TOPK_HINT = ("Find the k-th largest value per row (torch.topk(logits, k).values[..., -1:]) and remove "
             "every token strictly below it.")


def row(name, hint, *, visible=False, fixture=None, transformers=False):
    return case(name, f"top_k/{name}", hint, transformers, probe=("filtered", "top_k_filter", f"top_k/{name}"),
                visible=visible, fixture=fixture, hint=hint)


@pytest.mark.parametrize("key, hint, transformers", [
    row("keeps_k_largest", TOPK_HINT, visible=True, fixture="long_tail"),
    row("one_keeps_only_the_max", "top_k=1 keeps only the largest logit; compare logits, no exp() needed.",
        fixture="peaked"),
    row("ties_at_kth_value_all_kept", "The contract keeps every token EQUAL to the k-th largest value (as "
        "transformers does): compare with `<` against the k-th value, do not take exactly k indices.", fixture="ties"),
    row("k_at_least_vocab_keeps_all", "When top_k >= V, keep every token (clamp k to V before torch.topk).",
        fixture="flat"),
    row("batch_rows_independent", "Each row needs its own k-th value: keep the last dim (values[..., -1:]) so it "
        "broadcasts per row."),
    row("matches_transformers", TOPK_HINT, transformers=True),
])
def test_top_k(observation, key, hint, transformers):
    """The k largest logits of each row kept with their values (ties at the k-th value too), the rest -inf."""
    expected = (lambda x, top_k: ref.transformers_pipeline(x, top_k=top_k)) if transformers else ref.top_k_filter
    judge_filtered(observation, "top_k_filter", key, expected, hint)


INVALID_HINT = ("Check `top_k` first: an int (not bool) >= 1, else raise "
                "ValueError(f\"`top_k` must be an integer >= 1, got {top_k!r}.\").")


@pytest.mark.probe("invalid", "top_k_filter", "top_k/invalid_k_rejected")
@pytest.mark.cell(hint=INVALID_HINT)
def test_invalid_k_rejected(observation):
    """A top_k that is not an int >= 1 raises ValueError naming `top_k` and showing it."""
    judge_invalid(observation, "top_k_filter", "top_k/invalid_k_rejected", INVALID_HINT)


@pytest.mark.probe("filtered", "top_k_filter", "top_k/input_not_modified_new_tensor")
@pytest.mark.cell(hint=TOPK_HINT)
def test_input_not_modified_new_tensor(observation):
    """The input keeps its values and a new tensor comes back."""
    judge_filtered(observation, "top_k_filter", "top_k/input_not_modified_new_tensor", ref.top_k_filter, TOPK_HINT)
