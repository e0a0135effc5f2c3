"""softmax and log_softmax: the hidden cases of the cells softmax_is_stable and log_softmax_is_stable."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import reference_rejects
from autograder.core import Fail
from autograder.reference import lab01 as ref

from .judging import case, compare, got_tensor, unchanged, value_error
from .probes import inputs

SOFTMAX_HINTS = {
    "peaked": "softmax(x)_i = exp(x_i) / sum_j exp(x_j), over the last dimension.",
    "peaked_plus_1000": "exp(1009) overflows float32 to inf and inf/inf = NaN. Subtract the row maximum "
                        "before exp(): softmax(x) = softmax(x - max(x)).",
    "extreme_logits": "exp(1e4) is inf in float32. Subtract the row maximum first (x - x.amax(dim=-1, "
                      "keepdim=True)); then every exponent is <= 0.",
    "uniform_rows": "Equal logits must give exactly 1/V each, even when they are all 5000 (subtract the max).",
    "masked_logits": "-inf is a removed token: exp(-inf) = 0, so it must get probability 0 and the rest renormalise.",
    "pos_inf_rows": "In a row holding +inf, x - max gives inf - inf = NaN. Treat such rows separately: the +inf "
                    "entries share the mass evenly (1/k each for k of them), every other entry gets 0.",
    "batch_2_3_v": "Reduce over the last dimension only (dim=-1, keepdim=True), so (2, 3, V) gives (2, 3, V).",
}

LOG_SOFTMAX_HINTS = dict(SOFTMAX_HINTS)
LOG_SOFTMAX_HINTS.update({
    "peaked": "log_softmax(x) = x - max - log(sum(exp(x - max))), over the last dimension.",
    "extreme_logits": "log(softmax(x)) is log(0) = -inf where softmax underflows. Compute "
                      "x - max - log(sum(exp(x - max))) instead: it stays finite (about -2e4 here).",
    "masked_logits": "A removed token (-inf) has log-probability -inf; every other entry stays finite.",
    "pos_inf_rows": "In a row with k entries of +inf, those get log(1/k) and every other entry -inf (no NaN).",
})

CELLS = {"softmax": pytest.mark.cell("softmax_is_stable",
                                      description="softmax over the last dim: stable, +-inf rules, NaN rejected"),
         "log_softmax": pytest.mark.cell("log_softmax_is_stable",
                                          description="log_softmax = x - max - logsumexp: finite where softmax is "
                                                      "positive")}
ATOL = {"softmax": 1e-6, "log_softmax": 1e-5}
SAME = object()


def _in_cell(fn_name, param):
    return pytest.param(*param.values, id=param.id, marks=[*param.marks, CELLS[fn_name]])


def _values(fn_name):
    hints = SOFTMAX_HINTS if fn_name == "softmax" else LOG_SOFTMAX_HINTS

    def row(name, input_name, *, visible=False, fixture=SAME):
        return _in_cell(fn_name, case(name, input_name, probe=("call", fn_name, input_name), visible=visible,
                                      fixture=input_name if fixture is SAME else fixture, hint=hints.get(input_name)))

    return [
        row("peaked_matches_reference", "peaked", visible=True),
        row("large_logits_no_overflow", "peaked_plus_1000", visible=True, fixture="peaked"),
        row("extreme_logits_1e4", "extreme_logits"),
        row("uniform_rows_exactly_uniform", "uniform_rows", fixture="uniform_row"),
        row("masked_tokens_get_zero" if fn_name == "softmax" else "masked_tokens_get_minus_inf", "masked_logits"),
        row("pos_inf_takes_the_mass", "pos_inf_rows", fixture="pos_inf_logit"),
        row("batch_shape_2_3_v", "batch_2_3_v", fixture=None),
    ]


def _errors(fn_name):
    return [
        _in_cell(fn_name, case("nan_rejected", "nan_logits", "logits with a NaN",
                               probe=("call_expecting_error", fn_name, "nan_logits"), fixture="nan_logits")),
        _in_cell(fn_name, case("all_masked_row_rejected", "all_masked_row", "a row that is all -inf",
                               probe=("call_expecting_error", fn_name, "all_masked_row"),
                               hint="A row of only -inf leaves no token: raise ValueError naming `logits` instead "
                                    "of returning NaN.")),
    ]


def judge_values(fn_name, input_name, obs):
    hint = (SOFTMAX_HINTS if fn_name == "softmax" else LOG_SOFTMAX_HINTS).get(input_name)
    atol = ATOL[fn_name]
    got = got_tensor(obs["out"], f"{fn_name}", "float32", hint)
    expected = getattr(ref, fn_name)(inputs(input_name))
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        raise Fail(f"{fn_name} returned NaN", expected="no NaN", got=f"{int(torch.isnan(got).sum())} NaN entries",
                   hint=hint)
    compare(got, expected, what=fn_name, hint=hint, atol=atol, rtol=1e-5)
    if fn_name == "softmax" and input_name == "uniform_rows":
        rows = got.reshape(-1, got.shape[-1])
        if not bool((rows == rows[:, :1]).all()):
            raise Fail("a row of equal logits must give exactly equal probabilities",
                       hint="Compute every entry the same way: exp(x - max) / sum; no special cases per position.")
    unchanged(obs)


def judge_error(fn_name, input_name, what, obs):
    reference_rejects(getattr(ref, fn_name), (inputs(input_name),), {}, f"{fn_name} on {what}")
    for o in obs:
        value_error(o["out"], "logits", f"{fn_name} on {what}")


@pytest.mark.parametrize("input_name", _values("softmax"))
def test_softmax_values(observation, input_name):
    """softmax matches the reference over the last dim, stable for huge and infinite logits."""
    judge_values("softmax", input_name, observation)


@pytest.mark.parametrize("input_name, what", _errors("softmax"))
def test_softmax_rejects(observation, input_name, what):
    """softmax raises ValueError naming `logits` for NaN and for a row that is all -inf."""
    judge_error("softmax", input_name, what, observation)


@pytest.mark.parametrize("input_name", _values("log_softmax"))
def test_log_softmax_values(observation, input_name):
    """log_softmax matches the reference, finite wherever softmax is positive."""
    judge_values("log_softmax", input_name, observation)


@pytest.mark.parametrize("input_name, what", _errors("log_softmax"))
def test_log_softmax_rejects(observation, input_name, what):
    """log_softmax raises ValueError naming `logits` for NaN and for a row that is all -inf."""
    judge_error("log_softmax", input_name, what, observation)
