"""Decodes every token into `text`, so a run that stopped on EOS shows '<eos>' to the user."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"experiment_record_filled": ["greedy_stops_on_eos", "eos_on_last_allowed_token_is_stop",
                                            "sampled_record_fields"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    rec = _ref.run_experiment(model, temperature=temperature, seed=seed, max_tokens=max_tokens)
    rec.text = model.decode(rec.tokens)
    return rec
