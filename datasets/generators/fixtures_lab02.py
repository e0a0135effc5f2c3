"""Lab 02 fixtures: a long-tailed next-token distribution, and a JSON tool call whose
sampling can break the format (a wrong bracket and an early EOS with moderate probability)."""
from __future__ import annotations

import random

from fixture_lib import EOS, fixture

TAIL = [" big", " old", " city", " French", " home", " large", " very", " place", " where", " one",
        " also", " still", " often", " and", " in", " famous", " beautiful", " my", " our", " here",
        " so", " now", " just", " quite"]


def long_tail():
    vocab = [EOS, " Paris", " a", " the", " located", " known", " not"] + TAIL
    rng = random.Random(50)
    head = [-1.0, 5.0, 3.2, 3.0, 2.4, 2.0, 1.2]
    row = head + [rng.gauss(-1.0, 0.7) for _ in TAIL]
    return fixture("long_tail", "'The capital of France is' -> ' Paris' leads, 24 unlikely words form a long tail.",
                   ["top_p", "top_k", "widgets"], vocab, [row], eos_token_id=0,
                   prompt_ids=[], params={"top_p": 0.9, "top_k": 5})


# The greedy path spells {"tool": "get_weather", "args": {"city": "Paris"}} then EOS.
CALL = ['{"', "tool", '":', ' "', "get_weather", '",', ' "', "args", '":', " {",
        '"', "city", '":', ' "', "Paris", '"}', "}"]
WRONG = ['"]', "]", "London", "Rome"]  # the moderate-probability alternatives


def json_bracket_risk():
    vocab = [EOS, "Call:"]
    for tok in CALL + WRONG:
        if tok not in vocab:
            vocab.append(tok)
    ix = vocab.index
    rng = random.Random(51)
    steps = []
    for piece in CALL + [EOS]:
        row = [rng.gauss(-4.0, 0.6) for _ in vocab]  # background: far below the target
        row[ix(piece)] = 5.0
        if piece == "Paris":        # harmless alternatives: still valid JSON, more diversity
            row[ix("London")] = 4.2
            row[ix("Rome")] = 2.8
        if piece == '"}':           # a wrong bracket: '"]' breaks the JSON
            row[ix('"]')] = 3.4
        if piece == "}":            # ending early: EOS before the last brace breaks it too
            row[ix(EOS)] = 3.0
            row[ix("]")] = 2.2
        steps.append(row)
    return fixture("json_bracket_risk",
                   "A JSON tool call where a wrong bracket ('\"]') and an early EOS have moderate probability.",
                   ["structured_output", "top_p", "temperature"], vocab, steps, eos_token_id=0,
                   prompt_ids=[ix("Call:")], params={"max_tokens": len(CALL) + 1})


FIXTURES = [long_tail(), json_bracket_risk()]
