"""Never checks the temperature: -1 flips the distribution, NaN gives NaN logits,
inf gives all zeros, and a string raises TypeError instead of ValueError."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"temperature_rejects_invalid": ["negative_rejected", "nan_rejected", "inf_rejected",
                                               "non_number_rejected"]}

_apply_temperature = apply_temperature   # the solution's, kept before it is replaced


def apply_temperature(logits, temperature):
    if temperature == 0:
        return _apply_temperature(logits, 0)
    return logits / temperature                                # BUG: the temperature is never checked


def best_temperature_for_token(logits, token_id, temperatures):   # the solution's, on the solution's apply_temperature
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        raise ValueError(f"`logits` must be a 1-D tensor (V,), got {type(logits).__name__}.")
    n_tokens = logits.shape[0]
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < n_tokens:
        raise ValueError(f"`token_id` must be an integer in [0, {n_tokens - 1}], got {token_id!r}.")
    if not isinstance(temperatures, (list, tuple)) or len(temperatures) == 0:
        raise ValueError(f"`temperatures` must be a non-empty list of temperatures, got {temperatures!r}.")
    best = None
    for t in temperatures:
        p_token = softmax(_apply_temperature(logits, t))[token_id].item()
        if best is None or p_token > best["probability"]:
            best = {"temperature": float(t), "probability": p_token}
    return best


def run_experiment(model, *, temperature, seed, max_tokens):   # the solution's, on the solution's apply_temperature
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    _apply_temperature(torch.zeros(1), temperature)
    greedy = temperature == 0
    if not greedy and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer for a sampled run (temperature > 0), got {seed!r}.")
    gen = None if greedy else torch.Generator().manual_seed(seed)
    input_ids = model.prompt()
    tokens, finish = [], course.FinishReason.LENGTH
    for _ in range(max_tokens):
        next_logits = model(input_ids)[0]
        if greedy:
            token = int(greedy_token_ids(next_logits))
        else:
            p = softmax(_apply_temperature(next_logits, temperature))
            token = int(torch.multinomial(p, num_samples=1, generator=gen))
        tokens.append(token)
        input_ids = torch.cat([input_ids, torch.tensor([[token]])], dim=1)
        if token == model.eos_token_id:
            finish = course.FinishReason.STOP
            break
    visible = tokens[:-1] if finish is course.FinishReason.STOP else tokens
    used = {"temperature": float(temperature), "max_tokens": max_tokens}
    return course.ExperimentRecord(fixture=model.fixture.name, params=used, seed=None if greedy else seed,
                                   tokens=tokens, text=model.decode(visible), finish_reason=finish)
