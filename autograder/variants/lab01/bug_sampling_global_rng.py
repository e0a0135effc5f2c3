"""Samples with torch.multinomial(probs, 1) and no generator: the draws come from the global
RNG, so the seed is ignored, a rerun gives other tokens, and the caller's RNG state moves."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"sampling_is_seeded": ["same_seed_same_tokens", "global_seed_does_not_matter",
                                      "global_rng_untouched", "matches_documented_sampler"],
               "experiment_record_filled": ["sampled_record_fields"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    check_temperature(temperature)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    if temperature != 0 and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer, got {seed!r}.")
    ids = model.prompt()
    tokens, finish = [], course.FinishReason.LENGTH
    while len(tokens) < max_tokens:
        logits = model(ids)[0]
        if temperature == 0:
            token = int(greedy_token_ids(logits))
        else:
            token = int(torch.multinomial(softmax(apply_temperature(logits, temperature)), 1))
        tokens.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        if token == model.eos_token_id:
            finish = course.FinishReason.STOP
            break
    shown = tokens[:-1] if finish is course.FinishReason.STOP else tokens
    return course.ExperimentRecord(fixture=model.fixture.name,
                                   params={"temperature": float(temperature), "max_tokens": max_tokens},
                                   seed=None if temperature == 0 else seed, tokens=tokens,
                                   text=model.decode(shown), finish_reason=finish)
