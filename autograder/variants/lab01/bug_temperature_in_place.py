"""Divides in place (logits.div_(T)): the caller's logits change, and the result is the
input tensor itself."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"temperature_scales_logits": ["divides_logits_by_t", "low_t_sharpens", "integer_temperature",
                                             "batch_shape_2_3_v", "masked_stay_masked", "t_one_returns_a_copy"]}


def apply_temperature(logits, temperature):
    if temperature == 0:
        return _ref.apply_temperature(logits, temperature)
    check_temperature(temperature)
    return logits.div_(temperature)
