"""apply_temperature(logits, temperature): the hidden cases of the cells temperature_scales_logits,
temperature_zero_is_greedy and temperature_rejects_invalid."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import reference_rejects, rejects
from autograder.core import Fail
from autograder.reference import lab01 as ref

from .judging import case, compare, got_tensor, unchanged
from .probes import BAD_TEMPERATURES, inputs

AFTER_SOFTMAX = ("Temperature divides the LOGITS, before softmax: return logits / T. Dividing (or "
                 "renormalising) probabilities after softmax does not change the distribution.")
ZERO_HINT = ("T == 0 is greedy and must not divide (x / 0 gives inf, -inf and 0/0 = NaN): keep the argmax "
             "logit as it is and set every other entry to -inf.")
SCALES = pytest.mark.cell("temperature_scales_logits",
                          description="apply_temperature with T > 0 divides the logits and returns a new tensor")
ZERO = pytest.mark.cell("temperature_zero_is_greedy",
                        description="apply_temperature(logits, 0): -inf except the argmax, no NaN")
INVALID = pytest.mark.cell("temperature_rejects_invalid",
                           description="negative, NaN, infinite or non-number temperatures raise ValueError")


def row(name, input_name, temperature, hint, *, visible=False, fixture=None):
    return case(name, input_name, temperature, hint, probe=("call", "apply_temperature", input_name, temperature),
                visible=visible, fixture=fixture or input_name, hint=hint)


@SCALES
@pytest.mark.parametrize("input_name, temperature, hint", [
    row("divides_logits_by_t", "peaked", 2.0, AFTER_SOFTMAX, visible=True),
    row("low_t_sharpens", "flat", 0.25, AFTER_SOFTMAX, visible=True),
    row("integer_temperature", "answer_ranked_low", 3, "An int temperature is a number too: divide by "
        "float(temperature)."),
    case("batch_shape_2_3_v", "batch_2_3_v", 0.7, "Divide every entry; the shape stays (2, 3, V) and -inf stays "
         "-inf.", probe=("call", "apply_temperature", "batch_2_3_v", 0.7),
         hint="Divide every entry; the shape stays (2, 3, V) and -inf stays -inf."),
    row("masked_stay_masked", "masked_logits", 0.5, "-inf / T is still -inf: a removed token stays removed."),
    row("t_one_returns_a_copy", "peaked", 1.0, "T = 1 changes no value, but still return a new tensor "
        "(logits / 1.0 or logits.clone())."),
])
def test_divides_the_logits(observation, input_name, temperature, hint):
    """T > 0: logits / T, a new tensor, the input unchanged."""
    got = got_tensor(observation["out"], "apply_temperature", "float32", hint)
    x = inputs(input_name)
    expected = ref.apply_temperature(x, temperature)
    try:
        compare(got, expected, what=f"apply_temperature(logits, {temperature!r})", hint=hint)
    except Fail as f:
        finite = torch.isfinite(got).all() and got.shape == x.shape
        p_x = ref.softmax(x)
        if finite and temperature != 1 and (
                torch.allclose(got, p_x / temperature, atol=1e-5)
                or torch.allclose(torch.softmax(got.double(), -1).float(), p_x, atol=1e-5)):
            raise Fail(f.message + " (softmax of your result equals the T = 1 distribution)",
                       expected=f.expected, got=f.got, hint=AFTER_SOFTMAX) from None
        raise
    if observation["shares_input"]:
        raise Fail("returned the input tensor itself, not a new tensor",
                   hint="Return a new tensor (logits / T makes one), so a caller's logits never change.")
    unchanged(observation)


def zero_row(name, input_name, hint, *, visible=False, fixture=None, temperature=0.0):
    return case(name, input_name, hint, probe=("call", "apply_temperature", input_name, temperature),
                visible=visible, fixture=fixture or input_name, hint=hint)


@ZERO
@pytest.mark.parametrize("input_name, hint", [
    zero_row("zero_keeps_only_argmax", "peaked", ZERO_HINT, visible=True),
    zero_row("zero_tie_keeps_lowest_id", "ties", "Two logits tie for the max: keep only the lower id, so softmax "
             "of the result is one-hot."),
    zero_row("integer_zero", "answer_ranked_low", "temperature=0 (an int) is greedy too.", temperature=0),
    case("zero_on_batch_2_3_v", "batch_2_3_v", "Pick the argmax per row over the last dimension; the result keeps "
         "the shape (2, 3, V).", probe=("call", "apply_temperature", "batch_2_3_v", 0.0),
         hint="Pick the argmax per row over the last dimension; the result keeps the shape (2, 3, V)."),
    zero_row("zero_with_extreme_logits", "extreme_logits", ZERO_HINT),
])
def test_zero_keeps_only_the_argmax(observation, input_name, hint):
    """T == 0: the argmax logit kept, every other entry -inf, no NaN."""
    got = got_tensor(observation["out"], "apply_temperature(logits, 0)", "float32", hint)
    expected = ref.apply_temperature(inputs(input_name), 0)
    if torch.isnan(got).any():
        raise Fail("apply_temperature(logits, 0) returned NaN", expected="no NaN",
                   got=f"{int(torch.isnan(got).sum())} NaN entries", hint=ZERO_HINT)
    compare(got, expected, what="apply_temperature(logits, 0)", hint=hint)
    unchanged(observation)


@ZERO
@pytest.mark.probe("tiny_vs_zero")
@pytest.mark.cell(fixture="answer_ranked_low",
                  hint="T = 1e-6 divides (huge but finite values); T = 0 keeps the argmax; both choose the same token.")
def test_tiny_t_agrees_with_zero(observation):
    """T = 1e-6 and T = 0 choose the same token."""
    hint = ("As T -> 0, softmax(x / T) puts all its mass on the argmax: T = 1e-6 and T = 0 must pick "
            "the same token (lowest id on ties).")
    x = inputs("answer_batch")
    tiny = got_tensor(observation["tiny"], "apply_temperature(logits, 1e-6)", "float32", hint)
    zero = got_tensor(observation["zero"], "apply_temperature(logits, 0)", "float32", ZERO_HINT)
    if torch.isnan(tiny).any() or torch.isnan(zero).any():
        raise Fail("returned NaN for a tiny or zero temperature", hint=ZERO_HINT)
    compare(tiny, ref.apply_temperature(x, 1e-6), what="apply_temperature(logits, 1e-6)", hint=hint, rtol=1e-5)
    compare(zero, ref.apply_temperature(x, 0), what="apply_temperature(logits, 0)", hint=ZERO_HINT)
    a, b = torch.argmax(tiny, dim=-1), torch.argmax(zero, dim=-1)
    if not torch.equal(a, b):
        raise Fail("the argmax at T = 1e-6 differs from the token kept at T = 0", expected=a.tolist(),
                   got=b.tolist(), hint=hint)


INVALID_HINT = ("Validate first: if the type is wrong (bool is not accepted), or temperature is NaN, infinite or "
                "< 0, raise ValueError(f\"`temperature` must be a finite number >= 0, got {temperature!r}.\").")


@INVALID
@pytest.mark.parametrize("key", [case(name, name, probe=("bad_temperatures", name), fixture="peaked",
                                      visible=(name == "negative_rejected"), hint=INVALID_HINT)
                                 for name in BAD_TEMPERATURES])
def test_invalid_temperature_rejected(observation, key):
    """A ValueError naming `temperature` and showing the value it got."""
    for (value,), o in zip(BAD_TEMPERATURES[key], observation):
        call = f"apply_temperature(logits, {value!r})"
        reference_rejects(ref.apply_temperature, (inputs("peaked"), value), {}, call)
        rejects({"result": o["out"]}, call, "temperature", value)
