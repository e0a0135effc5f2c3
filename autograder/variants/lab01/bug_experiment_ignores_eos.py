"""Never stops on EOS: keeps generating until max_tokens, so the scripted model runs out
of steps (and a real model would babble past its end). (Nor does it check `max_tokens`.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"experiment_record_filled": ["greedy_stops_on_eos", "greedy_records_no_seed"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    # BUG: no check of max_tokens
    apply_temperature(torch.zeros(1), temperature)
    greedy = temperature == 0
    if not greedy and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer for a sampled run (temperature > 0), got {seed!r}.")
    gen = None if greedy else torch.Generator().manual_seed(seed)

    input_ids = model.prompt()                                 # (1, L0)
    tokens = []
    for _ in range(max_tokens):
        next_logits = model(input_ids)[0]                      # (V,)
        if greedy:
            token = int(greedy_token_ids(next_logits))
        else:
            p = softmax(apply_temperature(next_logits, temperature))
            token = int(torch.multinomial(p, num_samples=1, generator=gen))
        tokens.append(token)
        input_ids = torch.cat([input_ids, torch.tensor([[token]])], dim=1)   # (1, L + 1)
        # BUG: no stop on model.eos_token_id
    used = {"temperature": float(temperature), "max_tokens": max_tokens}
    return course.ExperimentRecord(fixture=model.fixture.name, params=used, seed=None if greedy else seed,
                                   tokens=tokens, text=model.decode(tokens), finish_reason=course.FinishReason.LENGTH)
