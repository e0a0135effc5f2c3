"""Samples with torch.multinomial(probs, 1) and no generator: the draws come from the global
RNG, so the seed is ignored, a rerun gives other tokens, and the caller's RNG state moves."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"sampling_is_seeded": ["same_seed_same_tokens", "global_seed_does_not_matter",
                                      "global_rng_untouched", "matches_documented_sampler"],
               "experiment_record_filled": ["sampled_record_fields"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    apply_temperature(torch.zeros(1), temperature)             # same checks and message, up front
    greedy = temperature == 0
    if not greedy and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer for a sampled run (temperature > 0), got {seed!r}.")

    input_ids = model.prompt()                                 # (1, L0)
    tokens, finish = [], course.FinishReason.LENGTH
    for _ in range(max_tokens):
        next_logits = model(input_ids)[0]                      # (V,)
        if greedy:
            token = int(greedy_token_ids(next_logits))
        else:
            p = softmax(apply_temperature(next_logits, temperature))
            token = int(torch.multinomial(p, num_samples=1))  # BUG: the global RNG, not a seeded generator
        tokens.append(token)
        input_ids = torch.cat([input_ids, torch.tensor([[token]])], dim=1)   # (1, L + 1)
        if token == model.eos_token_id:
            finish = course.FinishReason.STOP
            break
    visible = tokens[:-1] if finish is course.FinishReason.STOP else tokens
    used = {"temperature": float(temperature), "max_tokens": max_tokens}
    return course.ExperimentRecord(fixture=model.fixture.name, params=used, seed=None if greedy else seed,
                                   tokens=tokens, text=model.decode(visible), finish_reason=finish)
