"""changed_positions(model, input_ids, other_ids, atol=1e-5): the hidden cases of the cell
changed_positions_shows_causality."""
from __future__ import annotations

import pytest

from autograder import memo
from autograder.checks import one_thread, reference_rejects, rejects, result_of, unchanged
from autograder.core import Fail
from autograder.reference import lab04 as ref
from autograder.toy_models import ids

from .judging import case, token_list
from .probes import BAD_CHANGED, BAD_SHAPE, CHANGED, DEFAULT_ATOL, MODELS, STRICT_ATOL, changed_args

pytestmark = pytest.mark.cell("changed_positions_shows_causality", points=1,
                              description="changed_positions reports exactly the positions whose logits differ")


@pytest.mark.parametrize("key, hint", [
    case("tiny_model_change_middle_token", "tiny_model_change_middle_token", "Run the model on both sequences and "
         "compare row t of the logits for every position t: max |a - b| > atol means t changed.",
         probe=("changed", "tiny_model_change_middle_token"), visible=True),
    case("change_last_token", "change_last_token", "Only the last position can see the last token; include "
         "position T-1.", probe=("changed", "change_last_token")),
    case("identical_inputs_change_nothing", "identical_inputs_change_nothing", "Equal inputs give equal logits: "
         "return [] (atol=0.0 is allowed: exact comparison).", probe=("changed", "identical_inputs_change_nothing")),
    case("non_causal_model_changes_everywhere", "non_causal_model_changes_everywhere", "Compare the logits "
         "themselves, not the argmax: here every position's logits move a little while the best token at early "
         "positions stays the same.", probe=("changed", "non_causal_model_changes_everywhere")),
    case("atol_is_a_strict_bound", "atol_is_a_strict_bound", f"A row changed when its largest difference is MORE "
         f"than atol: here one row differs by exactly atol={STRICT_ATOL} and must be left out. Use the atol you are "
         f"given.", probe=("changed", "atol_is_a_strict_bound")),
    case("default_atol_when_none_is_passed", "default_atol_when_none_is_passed", "Called without atol, use the "
         "signature's default atol=1e-5: here the rows differ by 1.2e-5, 1.2e-5, 9e-6 and 1.1e-5, so all but the "
         "9e-6 row changed.", probe=("changed", "default_atol_when_none_is_passed")),
])
def test_reports_the_changed_positions(observation, key, hint):
    """Exactly the positions whose logits row differs by more than atol, as a list of ints."""
    model, tokens, atol = CHANGED[key]
    with one_thread():
        if model == "tiny_decoder":      # kept in _expected.pt (autograder/memo.py: no model load here)
            kept = memo.expected("lab04", f"changed_{key}")
            a_tokens, b_tokens, expected = kept["a"], kept["b"], kept["expected"]
        else:
            a_tokens, b_tokens = tokens()
            expected = ref.changed_positions(*changed_args(MODELS[model](), a_tokens, b_tokens, atol))
        shown_atol = "" if atol is DEFAULT_ATOL else f", atol={atol!r}"
        call = f"changed_positions(model, <{len(a_tokens)} ids>, <{len(b_tokens)} ids>{shown_atol})"
        got = token_list(result_of(observation, call), "changed_positions")
        if got != expected:
            raise Fail("reported the wrong positions", expected=expected, got=got, hint=hint)
        unchanged(observation, call, allow_same_object=True)


@pytest.mark.probe("changed_rejects", "shape")
def test_rejects_mismatched_shapes(observation):
    """Different shapes raise ValueError naming `other_ids` and showing its shape."""
    with one_thread():
        reference_rejects(ref.changed_positions, BAD_SHAPE[1](), {}, "changed_positions(model, (1, 4), (1, 3))")
        rejects(observation[0], "changed_positions(model, (1, 4) ids, (1, 3) ids)", "other_ids", ids([1, 2, 3]),
                "Compare the shapes first: raise ValueError naming `other_ids` and showing its shape.")


@pytest.mark.probe("changed_rejects", "ids_and_atol")
def test_rejects_bad_ids_and_atol(observation):
    """Ids that are not (1, T) long, and an atol that is negative, NaN, infinite or a bool, raise ValueError."""
    with one_thread():
        for (param, label, make), rec in zip(BAD_CHANGED, observation):
            call = f"changed_positions(model, ...) with {label}"
            reference_rejects(ref.changed_positions, make(), {}, call)
            rejects(rec, call, param, None, "Validate both id tensors ((1, T) long) and atol (finite, >= 0) before "
                                            "calling the model; name the parameter in the ValueError.",
                    show_value=False)
