"""Never stops on EOS: keeps generating until max_tokens, so the scripted model runs out
of steps (and a real model would babble past its end)."""
from autograder.reference.lab01 import *  # noqa: F401,F403

EXPECT_FAIL = {"experiment_record_filled": ["greedy_stops_on_eos", "greedy_records_no_seed"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    check_temperature(temperature)
    gen = None if temperature == 0 else torch.Generator().manual_seed(seed)
    ids, tokens = model.prompt(), []
    while len(tokens) < max_tokens:
        logits = model(ids)[0]
        if gen is None:
            token = int(greedy_token_ids(logits))
        else:
            token = int(torch.multinomial(softmax(apply_temperature(logits, temperature)), 1, generator=gen))
        tokens.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return course.ExperimentRecord(fixture=model.fixture.name,
                                   params={"temperature": float(temperature), "max_tokens": max_tokens},
                                   seed=None if gen is None else seed, tokens=tokens, text=model.decode(tokens),
                                   finish_reason=course.FinishReason.LENGTH)
