"""Graders for lab00 (orientation): `greedy_token(logits) -> int`.

Contract coverage (the docstring of the stub in solutions/lab00 -> hidden cases):

  | clause                                                   | case(s)                    |
  | returns the id (a Python int) of the largest logit       | peaked_distribution        |
  | ties go to the lowest token id                           | exact_tie_goes_to_lowest_id|
  | -inf entries are allowed (masked tokens)                 | masked_tokens_ignored      |
  | any finite magnitude (no exp overflow)                   | extreme_logits             |
  | NaN raises ValueError naming `logits`                    | nan_rejected               |
  | a shape that is not 1-D raises ValueError naming `logits`| non_1d_rejected            |
  | the input tensor is not changed                          | every value case           |
"""
from __future__ import annotations

import torch

import course

from ..checks import Input, record, reference_rejects, rejects, result_of, unchanged
from ..core import Case, Fail, Test, function
from ..reference import lab00 as ref

LAB = "lab00"

API = {"greedy_token": "(logits)"}


# ---------------------------------------------------------------- inputs

def fixture_input(name: str) -> Input:
    """The first logit row of a fixture, (V,)."""
    return Input(f"fixture {name!r}", lambda: (course.fixtures.load(name).logits(0),))


# ---------------------------------------------------------------- probes

def probe_greedy(inp: Input):
    def probe(ns):
        rec = record(function(ns, "greedy_token"), inp.args())
        out = rec["result"]
        if hasattr(out, "item") and getattr(out, "dim", lambda: 1)() == 0:
            rec["result"] = out.item()  # a 0-d tensor is an acceptable answer
        return rec
    return probe


# ---------------------------------------------------------------- judges

def judge_token(inp: Input, hint: str):
    def judge(rec):
        call = inp.call_text("greedy_token")
        expected = ref.greedy_token(*inp.args())
        got = result_of(rec, call, hint, expected=expected)
        if type(got) is not int:
            raise Fail(f"{call} should return a Python int (use int(...) or .item())",
                       expected="int", got=type(got).__name__, hint=hint)
        if got != expected:
            raise Fail(f"{call} picked the wrong token", expected=expected, got=got, hint=hint)
        unchanged(rec, call)
    return judge


def judge_rejected(inp: Input, hint: str):
    def judge(rec):
        reference_rejects(ref.greedy_token, inp.args(), {}, inp.call_text("greedy_token"))
        rejects(rec, inp.call_text("greedy_token"), "logits", inp.args()[0], hint)
    return judge


BATCH = Input("a (2, V) batch", lambda: (torch.stack([course.fixtures.load("peaked").logits(0),
                                                        course.fixtures.load("flat").logits(0)]),))


def token_case(name: str, fixture: str, hint: str, *, visible: bool = False) -> Case:
    inp = fixture_input(fixture)
    return Case(name, 1, probe_greedy(inp), judge_token(inp, hint), visible=visible, fixture=fixture)


# ---------------------------------------------------------------- tests

TESTS = [
    Test(LAB, "greedy_token_picks_argmax", "greedy_token returns the id of the largest logit", (
        token_case("peaked_distribution", "peaked", "The greedy token is the index of the largest logit.",
                   visible=True),
        token_case("exact_tie_goes_to_lowest_id", "ties",
                   "Two logits are equal; the contract says the lowest id wins."),
        token_case("masked_tokens_ignored", "masked_logits",
                   "-inf marks a removed token; it can never be the argmax."),
        token_case("extreme_logits", "extreme_logits",
                   "Compare logits directly; no exp() is needed to find a maximum."),
        Case("nan_rejected", 1, probe_greedy(fixture_input("nan_logits")),
             judge_rejected(fixture_input("nan_logits"), "Check torch.isnan(logits).any() first and raise "
                                                         "ValueError with a message naming `logits`."),
             fixture="nan_logits"),
        Case("non_1d_rejected", 1, probe_greedy(BATCH),
             judge_rejected(BATCH, "The contract takes one row (V,): check logits.dim() == 1 and raise ValueError "
                                   "naming `logits` and showing its shape."), fixture="peaked"),
    )),
]
