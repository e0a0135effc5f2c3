"""Judging helpers shared by lab05's tests (grading process only: they use the reference)."""
from __future__ import annotations

import pytest

from autograder.checks import Input, reference_rejects, rejects, result_of
from autograder.core import Fail, describe
from autograder.reference import lab05 as ref

from ._inputs import config


def case(name, *values, probe, visible=False, points=1):
    """One row of a case table: `values` for the test's parameters and the probe call (name, *plain args)."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, points=points)])


def call_text(fn_name, label, kwargs=None):
    """How a message names a call: fn_name(<label>, key=value, ...)."""
    return Input(label, tuple, dict(kwargs or {})).call_text(fn_name)


def records(obs, n):
    """The probe's list of n call records (anything else is the grader's own fault)."""
    if not isinstance(obs, list) or len(obs) != n or not all(isinstance(r, dict) and "result" in r for r in obs):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


def observed(obs, *keys):
    """The probe's dict with these keys (anything else is not what the probe builds: no verdict from it)."""
    if not isinstance(obs, dict) or any(k not in obs for k in keys):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


def int_result(rec, call, expected, hint):
    """The call returned exactly the int `expected`."""
    got = result_of(rec, call)
    if type(got) is not int or got != expected:
        raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)


def judge_config_calls(obs, names, dtype_bytes, hint):
    """kv_bytes_for_config on each named config (see _inputs.config) gave the reference's count."""
    for n, rec in zip(names, records(obs, len(names))):
        call = f"kv_bytes_for_config(<{n}>{'' if dtype_bytes is None else f', dtype_bytes={dtype_bytes}'})"
        int_result(rec, call, ref.kv_bytes_for_config(config(n), dtype_bytes), hint)


def judge_rejects(obs, fn_name, bad):
    """Each (param, label, args, kwargs) call raised ValueError naming `param` and showing its
    value (kwargs[param], or the label for a positional one); the reference rejects it too."""
    for (param, label, args, kwargs), rec in zip(bad, records(obs, len(bad))):
        call = call_text(fn_name, label, kwargs)
        reference_rejects(getattr(ref, fn_name), tuple(args), kwargs, call)
        rejects(rec, call, param, kwargs.get(param, label))


def calls_of(bad):
    """The probe's [args, kwargs] of a table of (param, label, args, kwargs)."""
    return [[list(args), dict(kwargs)] for _, _, args, kwargs in bad]


EXACT_HINT = ("A request caches at most prompt + max_tokens - 1 tokens (the last token is returned, never fed "
              "back): 5 + 12 - 1 = 16 tokens fill 8 blocks of 2 exactly, so it runs. Refuse only when "
              "blocks_needed(prompt + max_tokens - 1) > num_blocks.")
