"""Checks max_tokens before EOS: an EOS on the last allowed token is reported as `length`
(and its text kept), though the model ended normally."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"experiment_record_filled": ["eos_on_last_allowed_token_is_stop"]}

_run = run_experiment   # the solution's, kept before it is replaced


def run_experiment(model, *, temperature, seed, max_tokens):
    rec = _run(model, temperature=temperature, seed=seed, max_tokens=max_tokens)
    if len(rec.tokens) == max_tokens:                          # BUG: the length limit wins over EOS
        rec.finish_reason = course.FinishReason.LENGTH
        rec.text = model.decode(rec.tokens)
    return rec
