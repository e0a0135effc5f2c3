"""Checks max_tokens before EOS: an EOS on the last allowed token is reported as `length`
(and its text kept), though the model ended normally."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"experiment_record_filled": ["eos_on_last_allowed_token_is_stop"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    rec = _ref.run_experiment(model, temperature=temperature, seed=seed, max_tokens=max_tokens)
    if len(rec.tokens) == max_tokens:
        rec.finish_reason = course.FinishReason.LENGTH
        rec.text = model.decode(rec.tokens)
    return rec
