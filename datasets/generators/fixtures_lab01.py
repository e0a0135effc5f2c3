"""Lab 01 fixtures: what temperature can and cannot change, and a short run that
ends either on EOS or on max_tokens depending on what was sampled."""
from __future__ import annotations

import random

from fixture_lib import EOS, fixture

QUESTION = "Q: What is the capital of Australia? A:"
CITIES = [" Sydney", " Melbourne", " Perth", " Canberra", " Brisbane"]


def answer_ranked_low():
    # The right answer (' Canberra') is in the vocabulary but ranked 4th: three wrong
    # cities sit above it. Dividing by any T > 0 keeps that order, so ' Canberra' can
    # never be more likely than the three above it (at most 1/4 of the mass).
    vocab = [EOS, QUESTION] + CITIES + [" the", " I"]
    row = [-2.0, -8.0, 6.0, 4.5, 3.0, 2.2, 1.8, 0.5, -1.0]
    return fixture("answer_ranked_low",
                   "The right answer ' Canberra' is ranked 4th: no temperature makes it the likely one.",
                   ["temperature", "ranking"], vocab, [row], eos_token_id=0, prompt_ids=[1],
                   params={"answer": " Canberra"})


def answer_not_in_candidates():
    # The right answer has no token at all: every temperature spreads the mass over
    # wrong answers only.
    vocab = [EOS, QUESTION, " Sydney", " Melbourne", " Perth", " Brisbane", " the", " I"]
    row = [-2.0, -8.0, 6.0, 4.5, 3.0, 1.8, 0.5, -1.0]
    return fixture("answer_not_in_candidates",
                   "The right answer ' Canberra' is not in the vocabulary: temperature cannot create it.",
                   ["temperature", "vocabulary"], vocab, [row], eos_token_id=0, prompt_ids=[1],
                   params={"answer": " Canberra"})


def eos_or_length():
    # Six scripted steps with a small margin (1.5) over the noise, so sampling wanders.
    # Greedy spells ' upon a time' and stops on EOS at step 3; EOS is likely again at
    # step 5, and a run that avoids it hits max_tokens = 6 (the script's length, so a
    # loop that respects max_tokens never runs out of steps).
    vocab = [EOS, "Once", " upon", " a", " time", " there", " was", " cat", "."]
    targets = [2, 3, 4, 0, 8, 0]
    rng = random.Random(101)
    steps = []
    for t in targets:
        row = [rng.gauss(0.0, 1.0) for _ in vocab]
        row[1] = -6.0  # the prompt token is never continued with itself
        row[t] = max(row) + 1.5
        steps.append(row)
    return fixture("eos_or_length",
                   "Greedy stops on EOS at step 3; sampled runs may go on until max_tokens=6.",
                   ["sampling", "seed", "finish_reason"], vocab, steps, eos_token_id=0, prompt_ids=[1],
                   params={"max_tokens": 6})


FIXTURES = [answer_ranked_low(), answer_not_in_candidates(), eos_or_length()]
