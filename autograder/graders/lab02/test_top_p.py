"""top_p_filter(logits, top_p, min_tokens_to_keep=1): the hidden cases of the cell top_p_keeps_crossing_token."""
from __future__ import annotations

import pytest

from autograder.reference import lab02 as ref

from .judging import case, judge_filtered, judge_invalid

pytestmark = pytest.mark.cell("top_p_keeps_crossing_token", points=1,
                              description="top_p_filter keeps the smallest nucleus reaching top_p")

TOPP_HINT = ("Sort descending (stable), softmax, cumsum; a token is kept while the probability BEFORE it "
             "is still < top_p (the crossing token is kept); scatter the mask back to vocabulary order.")


def row(name, hint, *, visible=False, fixture=None, transformers=False):
    return case(name, f"top_p/{name}", hint, transformers, probe=("filtered", "top_p_filter", f"top_p/{name}"),
                visible=visible, fixture=fixture, hint=hint)


@pytest.mark.parametrize("key, hint, transformers", [
    row("exact_boundary_keeps_two", "1/2 + 1/4 reaches 0.75 exactly: keep those two and nothing after. Remove a "
        "token when the probability before it is >= top_p (not >).", visible=True, fixture="top_p_exact_boundary"),
    row("crossing_token_kept", "The token whose probability makes the running sum cross top_p belongs to the "
        "nucleus: compare the sum of the tokens BEFORE each token with top_p.", visible=True, fixture="long_tail"),
    row("ties_at_boundary_lowest_id_first", "Among equal probabilities the lower token id comes first: sort with "
        "torch.sort(..., descending=True, stable=True).", fixture="ties"),
    row("batch_rows_get_own_cutoff", "Every row has its own cut-off: compute the cumulative sums on the whole "
        "(B, V) tensor along dim=-1 (no loop, no cut-off shared between rows)."),
    row("extreme_logits", "exp() of a logit near 1e4 overflows: use torch.softmax, which subtracts the maximum.",
        fixture="extreme_logits"),
    row("masked_tokens_stay_removed", "-inf logits have probability 0: they sort last and must stay -inf.",
        fixture="masked_logits"),
    row("min_tokens_to_keep", "After computing the mask in sorted order, never remove the first min_tokens_to_keep "
        "sorted positions (mask[..., :min_tokens_to_keep] = False); more than V keeps all.", fixture="peaked"),
    row("p_equal_one_keeps_all", "top_p == 1 turns the filter off: return a copy of every logit, even one whose "
        "probability rounds to 0 (float rounding can make the running sum reach 1 early)."),
    row("matches_transformers", TOPP_HINT, transformers=True),
])
def test_top_p(observation, key, hint, transformers):
    """The smallest stable-sorted prefix reaching top_p kept with its values, the rest -inf."""
    expected = (lambda x, top_p: ref.transformers_pipeline(x, top_p=top_p)) if transformers else ref.top_p_filter
    judge_filtered(observation, "top_p_filter", key, expected, hint)


INVALID_HINT = ("Validate before computing: `top_p` a number (not bool) with 0 < top_p <= 1 (NaN fails both "
                "comparisons), `min_tokens_to_keep` an int >= 1; raise ValueError(f\"`top_p` must be in (0, 1], "
                "got {top_p!r}.\").")


@pytest.mark.probe("invalid", "top_p_filter", "top_p/invalid_parameters_rejected")
@pytest.mark.cell(hint=INVALID_HINT)
def test_invalid_parameters_rejected(observation):
    """A bad top_p or min_tokens_to_keep raises ValueError naming it and showing the value."""
    judge_invalid(observation, "top_p_filter", "top_p/invalid_parameters_rejected", INVALID_HINT)


@pytest.mark.probe("filtered", "top_p_filter", "top_p/input_not_modified_new_tensor")
@pytest.mark.cell(hint=TOPP_HINT)
def test_input_not_modified_new_tensor(observation):
    """The input keeps its values and a new tensor comes back."""
    judge_filtered(observation, "top_p_filter", "top_p/input_not_modified_new_tensor", ref.top_p_filter, TOPP_HINT)
