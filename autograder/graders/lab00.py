"""Graders for lab00 (orientation): `greedy_token(logits) -> int`.

Contract (the docstring of the stub in solutions/lab00):
  * returns the id (a Python int) of the largest logit of a 1-D tensor;
  * ties go to the lowest token id;
  * -inf entries are allowed (masked tokens); NaN raises ValueError;
  * the input tensor is not changed.
"""
from __future__ import annotations

import course

from ..core import Case, Fail, Test, function, is_raised, raised, same_values
from ..reference import lab00 as ref

LAB = "lab00"


def _probe_on(fixture_name):
    def probe(ns):
        fn = function(ns, "greedy_token")
        logits = course.fixtures.load(fixture_name).logits(0)
        before = logits.clone()
        try:
            out = fn(logits)
        except Exception as e:  # recorded, judged by the parent
            return {"result": raised(e), "unchanged": same_values(logits, before)}
        if hasattr(out, "item") and getattr(out, "dim", lambda: 1)() == 0:
            out = out.item()  # a 0-d tensor is an acceptable answer
        return {"result": out, "unchanged": same_values(logits, before)}
    return probe


def _judge_token(fixture_name, hint):
    def judge(obs):
        expected = ref.greedy_token(course.fixtures.load(fixture_name).logits(0))
        got = obs["result"]
        if is_raised(got):
            raise Fail(f"raised {got['__raised__']}: {got['message']}", expected=expected, hint=hint)
        if type(got) is not int:
            raise Fail("should return a Python int (use int(...) or .item())",
                       expected="int", got=type(got).__name__, hint=hint)
        if got != expected:
            raise Fail("picked the wrong token", expected=expected, got=got, hint=hint)
        if not obs["unchanged"]:
            raise Fail("changed the logits tensor it was given", hint="Never modify the input in place.")
    return judge


def _judge_nan(obs):
    got = obs["result"]
    if not is_raised(got) or not got["is_value_error"]:
        raise Fail("NaN logits must raise ValueError", expected="ValueError", got=got,
                   hint="Check torch.isnan(logits).any() first and raise ValueError with a clear message.")
    if "logits" not in got["message"]:
        raise Fail("the error message should name the parameter `logits`", expected="a message naming `logits`",
                   got=got["message"])


TESTS = [
    Test(LAB, "greedy_token_picks_argmax", "greedy_token returns the id of the largest logit", (
        Case("peaked_distribution", 1, _probe_on("peaked"),
             _judge_token("peaked", "The greedy token is the index of the largest logit."),
             visible=True, fixture="peaked"),
        Case("exact_tie_goes_to_lowest_id", 1, _probe_on("ties"),
             _judge_token("ties", "Two logits are equal; the contract says the lowest id wins."),
             fixture="ties"),
        Case("masked_tokens_ignored", 1, _probe_on("masked_logits"),
             _judge_token("masked_logits", "-inf marks a removed token; it can never be the argmax."),
             fixture="masked_logits"),
        Case("extreme_logits", 1, _probe_on("extreme_logits"),
             _judge_token("extreme_logits", "Compare logits directly; no exp() is needed to find a maximum."),
             fixture="extreme_logits"),
        Case("nan_rejected", 1, _probe_on("nan_logits"), _judge_nan, fixture="nan_logits"),
    )),
]
