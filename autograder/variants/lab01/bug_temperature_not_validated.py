"""Never checks the temperature: -1 flips the distribution, NaN gives NaN logits,
inf gives all zeros, and a string raises TypeError instead of ValueError."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"temperature_rejects_invalid": ["negative_rejected", "nan_rejected", "inf_rejected",
                                               "non_number_rejected"]}


def apply_temperature(logits, temperature):
    if temperature == 0:
        return _ref.apply_temperature(logits, 0)
    return logits / temperature
