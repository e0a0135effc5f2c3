"""Treats T == 0 like any other temperature and divides: x / 0 is +inf, -inf, or NaN
(for a logit of exactly 0), instead of keeping only the argmax."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"temperature_zero_is_greedy": ["zero_keeps_only_argmax", "zero_tie_keeps_lowest_id",
                                              "integer_zero", "zero_on_batch_2_3_v",
                                              "zero_with_extreme_logits", "tiny_t_agrees_with_zero"]}


def apply_temperature(logits, temperature):
    check_temperature(temperature)
    check_logits(logits)
    return logits / temperature
