"""validate_params(*, max_tokens, stop, stop_token_ids, include_stop_str_in_output, deadline): the
hidden cases of the cell params_are_validated."""
from __future__ import annotations

import copy

import pytest

from autograder.checks import Input, reference_rejects, rejects, result_of
from autograder.core import Fail, describe
from autograder.reference import lab03 as ref

from .judging import case
from .probes import BAD_PARAMS, VALID_PARAMS

pytestmark = pytest.mark.cell("params_are_validated", points=1,
                              description="validate_params checks every stopping parameter up front")


def _kw(kw):
    text = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    return text if len(text) < 90 else text[:87] + "..."


def row(name, *, visible=False):
    return case(name, name, probe=("params", name), visible=visible)


@pytest.mark.parametrize("key", [
    row("accepts_and_normalises_valid_params", visible=True),
    row("rejects_max_tokens_zero", visible=True),
    row("accepts_boundary_values"),
    row("rejects_non_integer_max_tokens"),
    row("rejects_a_bare_string_as_stop"),
    row("rejects_empty_stop_strings"),
    row("rejects_more_than_16_stop_strings"),
    row("rejects_non_string_stop_items"),
    row("rejects_bad_deadline"),
    row("rejects_bad_stop_token_ids"),
    row("rejects_non_bool_include_stop_str"),
])
def test_validate_params(observation, key):
    """Valid parameters come back normalised (five keys, None -> []); each bad one raises ValueError
    naming the parameter and showing its value."""
    if key in VALID_PARAMS:
        for kw, rec in zip(VALID_PARAMS[key], observation):
            exp = ref.validate_params(**copy.deepcopy(kw))
            v = result_of(rec, f"validate_params({_kw(kw)}) is valid but", expected=exp)
            if v != exp:
                raise Fail(f"validate_params({_kw(kw)}) returned the wrong normalised dict", expected=exp, got=v,
                           hint="Return all five keys; None stop / stop_token_ids become [].")
        return
    param, calls = BAD_PARAMS[key]
    if not isinstance(observation, list) or len(observation) != len(calls):
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    for kw, rec in zip(calls, observation):
        inp = Input("", lambda: (), kw)
        call = inp.call_text("validate_params")
        reference_rejects(lambda **k: ref.validate_params(**k), (), kw, call)
        rejects(rec, call, param, kw.get(param, ""))
