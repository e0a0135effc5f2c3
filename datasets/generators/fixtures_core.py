"""The core fixtures every lab may use: distributions, stops, JSON, bad input."""
from __future__ import annotations

import math
import random

from fixture_lib import EOS, fixture, scripted

WORDS = [EOS, " the", " cat", " sat", " on", " a", " mat", "."]


def _noise(seed, n, scale=1.0):
    rng = random.Random(seed)
    return [rng.gauss(0.0, scale) for _ in range(n)]


def distributions():
    n = len(WORDS)
    peaked = _noise(1, n)
    peaked[2] = 9.0  # " cat" dominates
    flat = _noise(2, n, scale=0.05)
    ties = _noise(3, n, scale=0.5)
    ties[3] = ties[6] = 4.0  # " sat" and " mat" share the maximum exactly
    uniform = [1.5] * n
    extreme = [-1e4, 9999.0, 5000.0, 1e4, 0.0, -9999.0, -1.0, 9998.0]  # max not first
    return [
        fixture("peaked", "One token (' cat') carries almost all the mass.",
                ["softmax", "temperature", "greedy"], WORDS, [peaked]),
        fixture("flat", "Nearly uniform logits: sampling is close to a fair die.",
                ["softmax", "temperature", "entropy"], WORDS, [flat]),
        fixture("ties", "Two tokens (ids 3 and 6) share the maximum logit exactly.",
                ["greedy", "tie_break", "top_k", "top_p"], WORDS, [ties]),
        fixture("uniform_row", "Every logit equal: softmax must give exactly 1/V each.",
                ["softmax", "stability"], WORDS, [uniform]),
        fixture("extreme_logits", "Logits near +-1e4: a softmax without max-subtraction overflows.",
                ["softmax", "stability"], WORDS, [extreme]),
    ]


def top_p_boundary():
    # Probabilities 1/2, 1/4, 1/8, 1/16, 1/16: with top_p = 0.75 the cumulative sum
    # lands exactly on p after two tokens. Stored at full precision, these logits give
    # exactly these probabilities under a float32 softmax (checked in tests).
    vocab = [EOS, " yes", " no", " maybe", " later"]
    probs = [1 / 16, 1 / 2, 1 / 4, 1 / 8, 1 / 16]
    logits = [math.log(p) for p in probs]
    return [fixture("top_p_exact_boundary",
                    "Cumulative probability reaches exactly 0.75 after ' yes', ' no'.",
                    ["top_p", "boundary"], vocab, [logits], eos_token_id=0,
                    params={"top_p": 0.75}, digits=None)]


def stops():
    return [
        scripted("eos_at_step_3", "Greedy path ' the cat sat' then EOS at step 3.",
                 ["eos", "finish_reason"], [" the", " cat", " sat"], seed=10,
                 extra_vocab=[" on", " mat", "."], params={"max_tokens": 8}),
        scripted("stop_string_2_tokens", "Stop string '###' arrives as '#' + '##'.",
                 ["stop_string", "streaming"],
                 [" The", " answer", " is", " 4", ".", "#", "##", " more", " text"], seed=11,
                 extra_vocab=[" 5"], params={"stop": ["###"], "max_tokens": 16}),
        scripted("stop_string_3_tokens", "Stop string '\\nUser:' arrives as '\\n' + 'User' + ':'.",
                 ["stop_string", "streaming"],
                 [" Sure", ",", " here", " it", " is", ".", "\n", "User", ":", " again"], seed=12,
                 extra_vocab=[" no"], params={"stop": ["\nUser:"], "max_tokens": 16}),
        scripted("stop_string_diverges", "'\\nUse' starts to match '\\nUser:' then diverges; the run ends on EOS.",
                 ["stop_string", "streaming", "holdback"],
                 [" Ok", ".", "\n", "Use", " the", " map", "."], seed=13,
                 extra_vocab=["User", ":"], params={"stop": ["\nUser:"], "max_tokens": 16}),
    ]


TOOL_CALL = ['{"', "tool", '":', ' "', "get_weather", '",', ' "', "args", '":', " {",
             '"', "city", '":', ' "', "Paris", '"}', "}"]


def json_cases():
    return [
        scripted("json_tool_call_ok", "A complete JSON tool call followed by EOS.",
                 ["structured_output", "finish_reason"], TOOL_CALL, seed=20,
                 extra_vocab=["London", "get_time"], prompt=("Call:",), params={"max_tokens": 32}),
        scripted("json_cut_by_max_tokens", "The same tool call, but max_tokens=6 cuts it mid-object.",
                 ["structured_output", "max_tokens", "finish_reason"], TOOL_CALL, seed=21,
                 extra_vocab=["London", "get_time"], prompt=("Call:",), params={"max_tokens": 6}),
    ]


def bad_input():
    n = len(WORDS)
    with_nan = _noise(30, n)
    with_nan[4] = math.nan
    with_inf = _noise(31, n)
    with_inf[5] = math.inf
    masked = _noise(32, n)
    masked[1] = masked[7] = -math.inf  # -inf is how filters remove tokens: valid input
    return [
        fixture("nan_logits", "One NaN logit: bad input that must raise a clear error.",
                ["validation", "error"], WORDS, [with_nan]),
        fixture("pos_inf_logit", "One +inf logit: the documented answer is all mass on it.",
                ["softmax", "validation"], WORDS, [with_inf]),
        fixture("masked_logits", "Two tokens masked with -inf, as a filter leaves them.",
                ["softmax", "top_k", "top_p"], WORDS, [masked]),
    ]


FIXTURES = distributions() + top_p_boundary() + stops() + json_cases() + bad_input()
