"""Graders for lab01 (from logit to probability).

Graded API (the docstrings of the stubs in solutions/lab01):
  * check_logits(logits) -> None; ValueError naming `logits` for bad input
  * softmax(logits) -> (..., V) probabilities, stable, +inf / -inf rules, ValueError on NaN
  * log_softmax(logits) -> (..., V), finite wherever softmax is positive
  * greedy_token_ids(logits) -> LongTensor (...,), lowest id on ties
  * apply_temperature(logits, temperature) -> new (..., V) logits; T == 0 keeps only the argmax
  * entropy(probs) -> (...,) in nats, 0 log 0 = 0, validated
  * run_experiment(model, *, temperature, seed, max_tokens) -> course.ExperimentRecord
  * best_temperature_for_token(logits, token_id, temperatures) -> {"temperature", "probability"}

Probes build their inputs from fixtures (named in INPUTS, so probe and judge build
the same tensor), call the student's function and return what came back plus
whether the input survived unchanged. Judges recompute every expectation with
autograder/reference/lab01.py.

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

  | function / clause                                    | case(s)                                          |
  | check_logits: +-inf allowed, returns None, no change | valid_logits_pass                                |
  |   rejects NaN, an all -inf row, wrong type/dtype/dim | nan_rejected, all_masked_row_rejected,           |
  |   (naming `logits`)                                  | wrong_type_rejected                              |
  | softmax / log_softmax: value over the last dim       | peaked_matches_reference, batch_shape_2_3_v      |
  |   stable for huge and extreme logits                 | large_logits_no_overflow, extreme_logits_1e4     |
  |   equal logits -> exactly 1/V                        | uniform_rows_exactly_uniform                     |
  |   -inf -> 0 (log: -inf); +inf rows share the mass    | masked_tokens_get_.., pos_inf_takes_the_mass     |
  |   validated like check_logits                        | nan_rejected, all_masked_row_rejected            |
  | greedy_token_ids: argmax, lowest id, +inf, (..., V)  | peaked_argmax, exact_tie_.., pos_inf_rows, batch |
  |   NaN rejected                                       | nan_rejected                                     |
  | apply_temperature T > 0: logits / T, new tensor,     | divides_logits_by_t, low_t_sharpens,             |
  |   int T, -inf stays, (..., V), T = 1 a copy          | integer_temperature, masked_stay_masked, ..      |
  |   T = 0: argmax kept (lowest id), rest -inf, no NaN  | zero_keeps_only_argmax, zero_tie_.., integer_..  |
  |   T -> 0 agrees with T = 0                           | tiny_t_agrees_with_zero                          |
  |   rejects negative, NaN, +-inf, non-numbers (name    | negative_rejected, nan_rejected, inf_rejected,   |
  |   and value shown)                                   | non_number_rejected                              |
  | entropy: nats, 0 log 0 = 0, (..., V) -> (...),       | uniform_is_log_v, one_hot_is_zero, zeros_from_.. |
  |   sums within 1e-4 accepted, bad probs rejected      | sum_within_tolerance_accepted, invalid_probs_..  |
  | run_experiment: stop/length precedence, record       | greedy_stops_on_eos, length_when_.., eos_on_..,  |
  |   fields, seed None when greedy, validation          | greedy_records_no_seed, sampled_.., invalid_..   |
  |   own generator: same seed same tokens, global RNG   | same_seed_same_tokens (two global seeds),        |
  |   neither used nor changed, documented recipe        | global_seed_.., global_rng_untouched, matches_.. |
  | best_temperature_for_token: best T, first on ties,   | low_ranked_answer, argmax_token_best_at_zero     |
  |   a list or a tuple, token id 0, -inf token,         | (a tuple, token 0), masked_token_never_likely,   |
  |   validation                                         | invalid_arguments_rejected                       |
"""
from __future__ import annotations

import math

import torch

import course

from ..checks import close, reference_rejects, rejects, result_of
from ..core import Case, Fail, Test, as_tensor, describe, function, is_raised, is_tensor, raised, same_values
from ..reference import lab01 as ref

LAB = "lab01"

API = {
    "check_logits": "(logits)",
    "softmax": "(logits)",
    "log_softmax": "(logits)",
    "greedy_token_ids": "(logits)",
    "apply_temperature": "(logits, temperature)",
    "entropy": "(probs)",
    "run_experiment": "(model, *, temperature, seed, max_tokens)",
    "best_temperature_for_token": "(logits, token_id, temperatures)",
}
INF = math.inf
SAME = "<same as the input name>"  # default `fixture` label of a case: the input's own name


# ---------------------------------------------------------------- inputs

def _fx(name):
    return course.fixtures.load(name).logits(0)  # (V,)


def _two_pos_inf():
    x = _fx("peaked")
    x[2] = x[5] = INF
    return x


def _batch():
    rows = [_fx(n) for n in ("peaked", "flat", "ties", "masked_logits", "extreme_logits", "uniform_row")]
    return torch.stack(rows).reshape(2, 3, -1)  # (2, 3, V)


def _pos_inf_batch():
    return torch.stack([_fx("pos_inf_logit"), _two_pos_inf(), _fx("peaked")])  # (3, V)


INPUTS = {
    "peaked": lambda: _fx("peaked"),
    "flat": lambda: _fx("flat"),
    "ties": lambda: _fx("ties"),
    "peaked_plus_1000": lambda: _fx("peaked") + 1000.0,
    "extreme_logits": lambda: _fx("extreme_logits"),
    "uniform_rows": lambda: torch.stack([_fx("uniform_row"), torch.full((8,), 5000.0), torch.full((8,), -5000.0)]),
    "masked_logits": lambda: _fx("masked_logits"),
    "pos_inf_logit": lambda: _fx("pos_inf_logit"),
    "pos_inf_rows": _pos_inf_batch,
    "batch_2_3_v": _batch,
    "nan_logits": lambda: _fx("nan_logits"),
    "one_token_vocab": lambda: torch.tensor([[0.5], [-2.0]]),  # V = 1 is a (trivial) vocabulary
    "nan_in_batch": lambda: torch.stack([_fx("peaked"), _fx("nan_logits")]),
    "all_masked_row": lambda: torch.stack([_fx("peaked"), torch.full((8,), -INF)]),
    "answer_ranked_low": lambda: _fx("answer_ranked_low"),
    "answer_batch": lambda: torch.stack([_fx("answer_ranked_low")[:8], _fx("ties"), _fx("extreme_logits")]),
    # probabilities for entropy
    "uniform_probs": lambda: torch.full((8,), 1 / 8),
    "peaked_probs": lambda: torch.softmax(_fx("peaked"), dim=-1),
    "one_hot_probs": lambda: torch.nn.functional.one_hot(torch.tensor(3), 8).float(),
    "masked_probs": lambda: torch.softmax(_fx("masked_logits"), dim=-1),
    "batch_probs": lambda: _batch_probs(),
    "slightly_off_probs": lambda: torch.tensor([0.5, 0.25, 0.25 + 5e-5]),
}


def _batch_probs():
    x = _batch()  # (2, 3, V)
    x = torch.where(torch.isinf(x), torch.full_like(x, -30.0), x)  # finite rows for torch.softmax
    p = torch.softmax(x, dim=-1)
    p[1, 2] = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # one one-hot row
    return p  # (2, 3, V)


def _input(name):
    return INPUTS[name]()



# ---------------------------------------------------------------- probes

def _call(fn_name, input_name, *args):
    """Call fn(input, *args); exceptions propagate (the harness reports them)."""
    def probe(ns):
        fn = function(ns, fn_name)
        x = _input(input_name)
        before = x.clone()
        out = fn(x, *args)
        shares = isinstance(out, torch.Tensor) and (out is x or (out.numel() > 0 and out.data_ptr() == x.data_ptr()))
        return {"out": out, "unchanged": same_values(x, before), "shares_input": bool(shares)}
    return probe


def _call_expecting_error(fn_name, input_name, *arg_lists):
    """Call fn(input, *args) for each args tuple; record what came back or was raised."""
    def probe(ns):
        fn = function(ns, fn_name)
        outs = []
        for args in arg_lists:
            try:
                outs.append({"args": repr(args), "out": fn(_input(input_name), *args)})
            except NotImplementedError:
                raise
            except Exception as e:  # the contract requires an error: judged by the parent
                outs.append({"args": repr(args), "out": raised(e)})
        return outs
    return probe


# ---------------------------------------------------------------- judging helpers

def _got_tensor(got, what, dtype, hint):
    got = result_of({"result": got}, what, hint)
    if not is_tensor(got):
        raise Fail(f"{what} should return a torch tensor", expected="torch.Tensor", got=describe(got),
                   hint="Return a tensor built from the input with torch operations.")
    if got["dtype"] != dtype:
        raise Fail(f"{what} returned dtype {got['dtype']}, expected {dtype}", expected=dtype, got=got["dtype"],
                   hint="Keep the dtype of the input (float32 logits give float32 results)."
                   if dtype.startswith("float") else "torch.argmax returns int64 (torch.long) ids; return those.")
    return as_tensor(got, what)


def _compare(got, expected, *, what, hint, atol=1e-6, rtol=1e-5):
    """checks.close, with a hint about the last dimension when the shape is wrong."""
    if tuple(got.shape) != tuple(expected.shape) and "shape" not in (hint or ""):
        hint = "Work over the last dimension (dim=-1, keepdim=True) so any batch shape (..., V) works."
    close(got, expected, atol=atol, rtol=rtol, what=what, hint=hint)


def _unchanged(obs):
    if not obs["unchanged"]:
        raise Fail("changed the tensor it was given", hint="Never modify the input in place (no `x -= ...`, "
                   "no `.div_()`); build a new tensor.")


def _value_error(got, param, what):
    """got must be a raised ValueError whose message names `param` (the lab01 contract
    asks for the name; only apply_temperature's also asks for the value)."""
    rejects({"result": got}, what, param, None, show_value=False)


# ---------------------------------------------------------------- check_logits

VALID_LOGITS = ("peaked", "masked_logits", "pos_inf_rows", "batch_2_3_v", "extreme_logits", "one_token_vocab")


def _probe_check_valid(ns):
    fn = function(ns, "check_logits")
    outs = {}
    for name in VALID_LOGITS:
        x = _input(name)
        before = x.clone()
        outs[name] = {"out": fn(x), "unchanged": same_values(x, before)}
    return outs


def _judge_check_valid(obs):
    for name in VALID_LOGITS:  # the reference accepts each of them too
        ref.check_logits(_input(name))
    for name, o in obs.items():
        if o["out"] is not None:
            raise Fail(f"check_logits should return None for valid logits ({name})", expected=None,
                       got=describe(o["out"]), hint="Only raise on bad input; otherwise return nothing.")
        if not o["unchanged"]:
            raise Fail(f"check_logits changed the tensor it was given ({name})", hint="Only look at the input.")


def _probe_check_bad(*makers):
    def probe(ns):
        fn = function(ns, "check_logits")
        outs = []
        for label, make in makers:
            try:
                outs.append({"label": label, "out": fn(make())})
            except NotImplementedError:
                raise
            except Exception as e:  # the contract requires ValueError: judged by the parent
                outs.append({"label": label, "out": raised(e)})
        return outs
    return probe


def _judge_check_bad(*makers):
    def judge(obs):
        for (label, make), o in zip(makers, obs):
            reference_rejects(ref.check_logits, (make(),), {}, f"check_logits on {label}")
            _value_error(o["out"], "logits", f"check_logits on {label}")
    return judge


NAN_LOGITS = (("one NaN", lambda: _fx("nan_logits")), ("a NaN in a batch", lambda: INPUTS["nan_in_batch"]()))
ALL_MASKED = (("a row of only -inf", lambda: INPUTS["all_masked_row"]()),
              ("a 1-D all -inf vector", lambda: torch.full((4,), -INF)))
WRONG_TYPES = (("a Python list", lambda: [1.0, 2.0]), ("an int64 tensor", lambda: torch.tensor([1, 2, 3])),
               ("a 0-d tensor", lambda: torch.tensor(1.0)), ("an empty last dimension", lambda: torch.empty(2, 0)))


CHECK_TESTS = Test(LAB, "logits_are_validated", "check_logits accepts (..., V) float logits with +-inf; rejects the rest", (
    Case("valid_logits_pass", 1, _probe_check_valid, _judge_check_valid, visible=True,
         hint="-inf (a removed token) and +inf are allowed; only NaN, all -inf rows and wrong types are errors."),
    Case("nan_rejected", 1, _probe_check_bad(*NAN_LOGITS), _judge_check_bad(*NAN_LOGITS), visible=True,
         fixture="nan_logits",
         hint="torch.isnan(logits).any() finds a NaN anywhere; raise ValueError naming `logits`."),
    Case("all_masked_row_rejected", 1, _probe_check_bad(*ALL_MASKED), _judge_check_bad(*ALL_MASKED),
         fixture="masked_logits",
         hint="torch.isneginf(logits).all(dim=-1).any(): a row with every token removed leaves nothing to choose."),
    Case("wrong_type_rejected", 1, _probe_check_bad(*WRONG_TYPES), _judge_check_bad(*WRONG_TYPES),
         hint="Require a floating-point torch.Tensor with at least one dimension and V >= 1 tokens."),
))


# ---------------------------------------------------------------- softmax and log_softmax

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


def _judge_values(fn_name, input_name, ref_fn, hints, *, atol=1e-6, rtol=1e-5, extra=None):
    hint = hints.get(input_name)

    def judge(obs):
        got = _got_tensor(obs["out"], f"{fn_name}", "float32", hint)
        expected = ref_fn(_input(input_name))
        if torch.isnan(got).any() and not torch.isnan(expected).any():
            raise Fail(f"{fn_name} returned NaN", expected="no NaN", got=f"{int(torch.isnan(got).sum())} NaN entries",
                       hint=hint)
        _compare(got, expected, what=fn_name, hint=hint, atol=atol, rtol=rtol)
        if extra is not None:
            extra(got)
        _unchanged(obs)
    return judge


def _rows_exactly_uniform(got):
    rows = got.reshape(-1, got.shape[-1])
    if not bool((rows == rows[:, :1]).all()):
        raise Fail("a row of equal logits must give exactly equal probabilities",
                   hint="Compute every entry the same way: exp(x - max) / sum; no special cases per position.")


def _judge_error(fn_name, param, what, input_name=None):
    def judge(obs):
        if input_name is not None:  # the reference must reject the same input
            reference_rejects(getattr(ref, fn_name), (_input(input_name),), {}, f"{fn_name} on {what}")
        for o in obs:
            _value_error(o["out"], param, f"{fn_name} on {what}")
    return judge


def _stable_cases(fn_name, ref_fn, hints, atol, rtol):
    def values(case, input_name, *, visible=False, fixture=SAME, extra=None, points=1):
        return Case(case, points, _call(fn_name, input_name),
                    _judge_values(fn_name, input_name, ref_fn, hints, atol=atol, rtol=rtol, extra=extra),
                    visible=visible, fixture=input_name if fixture == SAME else fixture, hint=hints.get(input_name))

    return (
        values("peaked_matches_reference", "peaked", visible=True),
        values("large_logits_no_overflow", "peaked_plus_1000", visible=True, fixture="peaked"),
        values("extreme_logits_1e4", "extreme_logits"),
        values("uniform_rows_exactly_uniform", "uniform_rows", fixture="uniform_row",
               extra=_rows_exactly_uniform if fn_name == "softmax" else None),
        values("masked_tokens_get_zero" if fn_name == "softmax" else "masked_tokens_get_minus_inf", "masked_logits"),
        values("pos_inf_takes_the_mass", "pos_inf_rows", fixture="pos_inf_logit"),
        values("batch_shape_2_3_v", "batch_2_3_v", fixture=None),
        Case("nan_rejected", 1, _call_expecting_error(fn_name, "nan_logits", ()),
             _judge_error(fn_name, "logits", "logits with a NaN", "nan_logits"), fixture="nan_logits"),
        Case("all_masked_row_rejected", 1, _call_expecting_error(fn_name, "all_masked_row", ()),
             _judge_error(fn_name, "logits", "a row that is all -inf", "all_masked_row"),
             hint="A row of only -inf leaves no token: raise ValueError naming `logits` instead of returning NaN."),
    )


# ---------------------------------------------------------------- greedy ids

def _judge_greedy(input_name, hint):
    def judge(obs):
        got = _got_tensor(obs["out"], "greedy_token_ids", "int64", hint)
        expected = ref.greedy_token_ids(_input(input_name))
        _compare(got, expected, what="greedy_token_ids", hint=hint, atol=0, rtol=0)
        _unchanged(obs)
    return judge


def _greedy_case(name, input_name, hint, *, visible=False, fixture=SAME):
    return Case(name, 1, _call("greedy_token_ids", input_name), _judge_greedy(input_name, hint),
                visible=visible, fixture=input_name if fixture == SAME else fixture, hint=hint)


# ---------------------------------------------------------------- temperature

AFTER_SOFTMAX = ("Temperature divides the LOGITS, before softmax: return logits / T. Dividing (or "
                 "renormalising) probabilities after softmax does not change the distribution.")


def _judge_scaled(input_name, temperature, hint):
    def judge(obs):
        got = _got_tensor(obs["out"], "apply_temperature", "float32", hint)
        x = _input(input_name)
        expected = ref.apply_temperature(x, temperature)
        try:
            _compare(got, expected, what=f"apply_temperature(logits, {temperature!r})", hint=hint)
        except Fail as f:
            finite = torch.isfinite(got).all() and got.shape == x.shape
            p_x = ref.softmax(x)
            if finite and temperature != 1 and (
                    torch.allclose(got, p_x / temperature, atol=1e-5)
                    or torch.allclose(torch.softmax(got.double(), -1).float(), p_x, atol=1e-5)):
                raise Fail(f.message + " (softmax of your result equals the T = 1 distribution)",
                           expected=f.expected, got=f.got, hint=AFTER_SOFTMAX) from None
            raise
        if obs["shares_input"]:
            raise Fail("returned the input tensor itself, not a new tensor",
                       hint="Return a new tensor (logits / T makes one), so a caller's logits never change.")
        _unchanged(obs)
    return judge


def _scaled_case(name, input_name, temperature, hint, *, visible=False, fixture=SAME):
    return Case(name, 1, _call("apply_temperature", input_name, temperature),
                _judge_scaled(input_name, temperature, hint), visible=visible,
                fixture=input_name if fixture == SAME else fixture, hint=hint)


ZERO_HINT = ("T == 0 is greedy and must not divide (x / 0 gives inf, -inf and 0/0 = NaN): keep the argmax "
             "logit as it is and set every other entry to -inf.")


def _judge_zero(input_name, hint):
    def judge(obs):
        got = _got_tensor(obs["out"], "apply_temperature(logits, 0)", "float32", hint)
        expected = ref.apply_temperature(_input(input_name), 0)
        if torch.isnan(got).any():
            raise Fail("apply_temperature(logits, 0) returned NaN", expected="no NaN",
                       got=f"{int(torch.isnan(got).sum())} NaN entries", hint=ZERO_HINT)
        _compare(got, expected, what="apply_temperature(logits, 0)", hint=hint)
        _unchanged(obs)
    return judge


def _zero_case(name, input_name, hint, *, visible=False, fixture=SAME, temperature=0.0):
    return Case(name, 1, _call("apply_temperature", input_name, temperature), _judge_zero(input_name, hint),
                visible=visible, fixture=input_name if fixture == SAME else fixture, hint=hint)


def _probe_tiny_vs_zero(ns):
    fn = function(ns, "apply_temperature")
    x = _input("answer_batch")
    return {"tiny": fn(x.clone(), 1e-6), "zero": fn(x.clone(), 0.0)}


def _judge_tiny_vs_zero(obs):
    hint = ("As T -> 0, softmax(x / T) puts all its mass on the argmax: T = 1e-6 and T = 0 must pick "
            "the same token (lowest id on ties).")
    x = _input("answer_batch")
    tiny = _got_tensor(obs["tiny"], "apply_temperature(logits, 1e-6)", "float32", hint)
    zero = _got_tensor(obs["zero"], "apply_temperature(logits, 0)", "float32", ZERO_HINT)
    if torch.isnan(tiny).any() or torch.isnan(zero).any():
        raise Fail("returned NaN for a tiny or zero temperature", hint=ZERO_HINT)
    _compare(tiny, ref.apply_temperature(x, 1e-6), what="apply_temperature(logits, 1e-6)", hint=hint, rtol=1e-5)
    _compare(zero, ref.apply_temperature(x, 0), what="apply_temperature(logits, 0)", hint=ZERO_HINT)
    a, b = torch.argmax(tiny, dim=-1), torch.argmax(zero, dim=-1)
    if not torch.equal(a, b):
        raise Fail("the argmax at T = 1e-6 differs from the token kept at T = 0", expected=a.tolist(),
                   got=b.tolist(), hint=hint)


BAD_TEMPERATURES = {
    "negative_rejected": [(-1.0,), (-1e-9,)],
    "nan_rejected": [(math.nan,)],
    "inf_rejected": [(INF,), (-INF,)],
    "non_number_rejected": [("1.0",), (None,), (True,), ([1.0],)],
}


def _judge_bad_temperature(arg_lists):
    def judge(obs):
        for (value,), o in zip(arg_lists, obs):
            call = f"apply_temperature(logits, {value!r})"
            reference_rejects(ref.apply_temperature, (_input("peaked"), value), {}, call)
            rejects({"result": o["out"]}, call, "temperature", value)
    return judge


# ---------------------------------------------------------------- entropy

ENTROPY_NATS = "Entropy is in nats: use the natural log (torch.log). log2 gives bits (ln 8 = 2.079 nats = 3 bits)."
ENTROPY_ZERO = ("0 * log(0) is NaN in floating point, but its limit is 0: only sum p * log(p) over entries "
                "with p > 0 (torch.where, or torch.special.entr).")


def _judge_entropy(input_name, hint):
    def judge(obs):
        got = _got_tensor(obs["out"], "entropy", "float32", hint)
        probs = _input(input_name)
        expected = ref.entropy(probs)
        if torch.isnan(got).any():
            raise Fail("entropy returned NaN", expected="no NaN", got=f"{int(torch.isnan(got).sum())} NaN entries",
                       hint=ENTROPY_ZERO)
        try:
            _compare(got, expected, what="entropy", hint=hint, atol=1e-5)
        except Fail as f:
            if got.shape == expected.shape and torch.allclose(got.double(), expected.double() / math.log(2), atol=1e-4):
                raise Fail(f.message + " (your value is the entropy in bits)", expected=f.expected, got=f.got,
                           hint=ENTROPY_NATS) from None
            raise
        _unchanged(obs)
    return judge


def _entropy_case(name, input_name, hint, *, visible=False, fixture=None):
    return Case(name, 1, _call("entropy", input_name), _judge_entropy(input_name, hint), visible=visible,
                fixture=fixture, hint=hint)


BAD_PROBS = (("negative entry", torch.tensor([0.5, 0.7, -0.2])),
             ("a row summing to 0.9", torch.tensor([[0.5, 0.5], [0.45, 0.45]])),
             ("NaN", torch.tensor([0.5, math.nan, 0.5])),
             ("a Python list", [0.5, 0.5]))


def _probe_bad_probs(ns):
    fn = function(ns, "entropy")
    outs = []
    for label, p in BAD_PROBS:
        try:
            outs.append({"label": label, "out": fn(p)})
        except NotImplementedError:
            raise
        except Exception as e:  # the contract requires ValueError: judged by the parent
            outs.append({"label": label, "out": raised(e)})
    return outs


def _judge_bad_probs(obs):
    for (label, p), o in zip(BAD_PROBS, obs):
        reference_rejects(ref.entropy, (p,), {}, f"entropy of probabilities with {label}")
        _value_error(o["out"], "probs", f"entropy of probabilities with {label}")


# ---------------------------------------------------------------- run_experiment

def _probe_record(fixture, **kwargs):
    def probe(ns):
        fn = function(ns, "run_experiment")
        rec = fn(course.ScriptedModel(fixture), **kwargs)
        is_record = isinstance(rec, course.ExperimentRecord)
        return {"type": type(rec).__name__, "is_record": is_record,
                "record": rec.to_dict() if is_record else None}
    return probe


def _expected_record(fixture, **kwargs):
    return ref.run_experiment(course.ScriptedModel(fixture), **kwargs).to_dict()


def _check_tokens_plain(tokens):
    if type(tokens) is not list or not all(type(t) is int for t in tokens):
        raise Fail("`tokens` must be a list of Python ints", expected="list[int]", got=describe(tokens),
                   hint="Append int(token) for each generated token, not a tensor.")


def _judge_record(fixture, **kwargs):
    def judge(obs):
        if not obs["is_record"]:
            raise Fail("run_experiment should return a course.ExperimentRecord", expected="ExperimentRecord",
                       got=obs["type"], hint="Build and return course.ExperimentRecord(fixture=..., params=..., "
                       "seed=..., tokens=..., text=..., finish_reason=...).")
        got, exp = obs["record"], _expected_record(fixture, **kwargs)
        if got["fixture"] != exp["fixture"]:
            raise Fail("the record names the wrong fixture", expected=exp["fixture"], got=got["fixture"],
                       hint="Use the model's fixture name: model.fixture.name.")
        if set(got["params"]) != set(exp["params"]):
            raise Fail("`params` must hold exactly the keys temperature and max_tokens",
                       expected=sorted(exp["params"]), got=sorted(got["params"]),
                       hint='params={"temperature": float(temperature), "max_tokens": max_tokens}')
        for k in exp["params"]:
            if got["params"][k] != exp["params"][k] or type(got["params"][k]) not in (int, float):
                raise Fail(f"params[{k!r}] is wrong", expected=exp["params"][k], got=got["params"][k],
                           hint="Record the parameters the run used, as plain numbers.")
        if got["seed"] != exp["seed"] or type(got["seed"]) is not type(exp["seed"]):
            raise Fail("`seed` is wrong", expected=exp["seed"], got=got["seed"],
                       hint="Record the seed of a sampled run; a greedy run (T == 0) uses no seed: record None.")
        _check_tokens_plain(got["tokens"])
        if got["tokens"] != exp["tokens"]:
            raise Fail("generated the wrong tokens", expected=exp["tokens"], got=got["tokens"],
                       hint="Greedy: the argmax each step. Sampled: torch.multinomial(probs, 1, generator=gen) "
                       "with gen = torch.Generator().manual_seed(seed), made once per run.")
        if got["finish_reason"] != exp["finish_reason"]:
            raise Fail("wrong finish_reason", expected=exp["finish_reason"], got=got["finish_reason"],
                       hint="`stop` when the last token is EOS (including EOS on the last allowed token), "
                       "`length` when max_tokens tokens were generated without EOS.")
        if got["text"] != exp["text"]:
            raise Fail("wrong `text`", expected=exp["text"], got=got["text"],
                       hint="text = model.decode(tokens) without the EOS token, when the run stopped on EOS.")
    return judge


RECORD_HINT = ("One model call per token: logits = model(input_ids)[0]; append the token; stop when it is "
               "model.eos_token_id (`stop`) or when max_tokens tokens were made (`length`).")


def _record_case(name, fixture, *, visible=False, hint=RECORD_HINT, **kwargs):
    return Case(name, 1, _probe_record(fixture, **kwargs), _judge_record(fixture, **kwargs),
                visible=visible, fixture=fixture, hint=hint)


BAD_RUN_ARGS = (("max_tokens", {"temperature": 0.0, "seed": None, "max_tokens": 0}),
                ("max_tokens", {"temperature": 1.0, "seed": 1, "max_tokens": 2.5}),
                ("max_tokens", {"temperature": 0.0, "seed": None, "max_tokens": True}),
                ("seed", {"temperature": 1.0, "seed": None, "max_tokens": 3}),
                ("seed", {"temperature": 1.0, "seed": True, "max_tokens": 3}),
                ("temperature", {"temperature": -0.5, "seed": 1, "max_tokens": 3}))


def _probe_bad_run_args(ns):
    fn = function(ns, "run_experiment")
    outs = []
    for param, kwargs in BAD_RUN_ARGS:
        try:
            rec = fn(course.ScriptedModel("eos_at_step_3"), **kwargs)
            outs.append({"param": param, "kwargs": repr(kwargs), "out": f"returned a {type(rec).__name__}"})
        except NotImplementedError:
            raise
        except Exception as e:  # the contract requires ValueError: judged by the parent
            outs.append({"param": param, "kwargs": repr(kwargs), "out": raised(e)})
    return outs


def _judge_bad_run_args(obs):
    for (param, kwargs), o in zip(BAD_RUN_ARGS, obs):
        call = f"run_experiment(model, **{kwargs!r})"
        reference_rejects(ref.run_experiment, (course.ScriptedModel("eos_at_step_3"),), kwargs, call)
        _value_error(o["out"], param, call)


# ---------------------------------------------------------------- seeded sampling

SAMPLED = {"temperature": 1.5, "max_tokens": 6}
SEED_HINT = ("Make one torch.Generator per run, gen = torch.Generator().manual_seed(seed), and pass it to every "
             "draw: torch.multinomial(probs, 1, generator=gen). Never use or reseed the global RNG.")


def _tokens(fn, seed, temperature=SAMPLED["temperature"]):
    rec = fn(course.ScriptedModel("eos_or_length"), temperature=temperature, seed=seed,
             max_tokens=SAMPLED["max_tokens"])
    return rec.tokens if isinstance(rec, course.ExperimentRecord) else {"not_a_record": type(rec).__name__}


def _keep_global_rng(probe):
    def wrapped(ns):
        state = torch.get_rng_state()
        try:
            return probe(ns)
        finally:
            torch.set_rng_state(state)  # the student's kernel keeps its own global RNG
    return wrapped


@_keep_global_rng
def _probe_same_seed(ns):
    fn = function(ns, "run_experiment")
    out = {}
    for key, global_seed in (("first", 1), ("second", 2)):
        torch.manual_seed(global_seed)  # a run that draws from the global RNG differs; no luck involved
        out[key] = _tokens(fn, 7)
    return out


@_keep_global_rng
def _probe_global_seed(ns):
    fn = function(ns, "run_experiment")
    out = []
    for global_seed in (0, 12345, 2024):
        torch.manual_seed(global_seed)
        out.append(_tokens(fn, 7))
    return out


@_keep_global_rng
def _probe_rng_untouched(ns):
    fn = function(ns, "run_experiment")
    torch.manual_seed(99)
    before = torch.get_rng_state()
    _tokens(fn, 3)
    return {"untouched": bool(torch.equal(before, torch.get_rng_state()))}


@_keep_global_rng
def _probe_recipe(ns):
    fn = function(ns, "run_experiment")
    return {str(s): _tokens(fn, s) for s in range(6)}


@_keep_global_rng
def _probe_seeds_differ(ns):
    fn = function(ns, "run_experiment")
    return [_tokens(fn, s) for s in (0, 1, 2, 3, 4, 5, 6, 7)]


def _not_records(*runs):
    for r in runs:
        if isinstance(r, dict):
            raise Fail("run_experiment should return a course.ExperimentRecord", got=r["not_a_record"])
        _check_tokens_plain(r)


def _judge_same_seed(obs):
    _not_records(obs["first"], obs["second"])
    if obs["first"] != obs["second"]:
        raise Fail("two runs with the same seed gave different tokens", expected=obs["first"], got=obs["second"],
                   hint=SEED_HINT)


def _judge_global_seed(obs):
    _not_records(*obs)
    if any(t != obs[0] for t in obs):
        raise Fail("changing the global seed (torch.manual_seed) changed the tokens of a run with seed=7",
                   expected=obs[0], got=next(t for t in obs if t != obs[0]), hint=SEED_HINT)


def _judge_rng_untouched(obs):
    if not obs["untouched"]:
        raise Fail("run_experiment changed the global RNG state", hint=SEED_HINT)


def _judge_recipe(obs):
    for s, got in obs.items():
        _not_records(got)
        exp = ref.run_experiment(course.ScriptedModel("eos_or_length"), seed=int(s), **SAMPLED).tokens
        if got != exp:
            raise Fail(f"seed={s} gave different tokens from the documented sampler", expected=exp, got=got,
                       hint="Sample softmax(apply_temperature(logits, T)) with torch.multinomial(probs, 1, "
                       "generator=gen), gen = torch.Generator().manual_seed(seed) made once per run, one draw "
                       "per step, no other draws from gen.")


def _judge_seeds_differ(obs):
    _not_records(*obs)
    if len({tuple(t) for t in obs}) < 2:
        raise Fail("eight different seeds all gave the same tokens at T = 1.5", got=obs[0],
                   hint="Seed the generator with the `seed` argument, not a constant.")


# ---------------------------------------------------------------- best_temperature_for_token

GRID = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0]


def _probe_best(input_name, token_id, temperatures, as_tuple=False):
    def probe(ns):
        fn = function(ns, "best_temperature_for_token")
        x = _input(input_name)
        before = x.clone()
        out = fn(x, token_id, tuple(temperatures) if as_tuple else list(temperatures))  # both are allowed
        return {"out": out, "unchanged": same_values(x, before)}
    return probe


def _judge_best(input_name, token_id, temperatures, hint):
    def judge(obs):
        got = obs["out"]
        if type(got) is not dict or set(got) != {"temperature", "probability"}:
            raise Fail('should return {"temperature": float, "probability": float}', got=describe(got), hint=hint)
        t, p = got["temperature"], got["probability"]
        if type(t) not in (float, int) or type(p) not in (float, int):
            raise Fail("the temperature and probability must be Python numbers", got=describe(got),
                       hint="Convert with float(...).")
        x = _input(input_name)
        probs = [float(ref.softmax(ref.apply_temperature(x, tt))[token_id]) for tt in temperatures]
        best = max(probs)
        first_best = temperatures[probs.index(best)]
        # near-ties (within float noise) may go either way; exact ties go to the first in the list
        ok = [tt for i, tt in enumerate(temperatures)
              if probs[i] >= best - 1e-6 and probs.index(probs[i]) == i]
        if ref.best_temperature_for_token(x, token_id, list(temperatures))["temperature"] not in ok:
            raise Fail("grader error: the reference's choice is not among the best temperatures",
                       hint="This is a fault in the grader, not in your code: tell the course staff.")
        if t not in ok:
            raise Fail("picked the wrong temperature", expected=first_best, got=t, hint=hint)
        if abs(p - probs[temperatures.index(t)]) > 1e-5:
            raise Fail(f"wrong probability for the token at T = {t}", expected=probs[temperatures.index(t)],
                       got=p, hint="Return softmax(apply_temperature(logits, T))[token_id] at the chosen T.")
        if not obs["unchanged"]:
            raise Fail("changed the logits it was given", hint="Never modify the input in place.")
    return judge


def _best_case(name, input_name, token_id, hint, *, visible=False, fixture=SAME, temperatures=GRID, as_tuple=False,
               also_token=None):
    """also_token: a second token id asked about on the same logits (e.g. 0, the lowest valid id)."""
    probe = _probe_best(input_name, token_id, temperatures, as_tuple)
    judge = _judge_best(input_name, token_id, temperatures, hint)
    if also_token is not None:
        probe_also = _probe_best(input_name, also_token, temperatures, as_tuple)
        judge_also = _judge_best(input_name, also_token, temperatures, hint)
        probe, judge = (lambda ns, p=probe: {"main": p(ns), "also": probe_also(ns)},
                        lambda obs, j=judge: (j(obs["main"]), judge_also(obs["also"])))
    return Case(name, 1, probe, judge, visible=visible, fixture=input_name if fixture == SAME else fixture, hint=hint)


BAD_BEST = (("token_id", (9, [1.0])), ("token_id", (-1, [1.0])), ("token_id", (True, [1.0])),
            ("temperatures", (3, [])), ("temperatures", (3, 1.0)), ("temperature", (3, [1.0, -2.0])),
            ("logits", (3, [1.0])))   # logits given as a Python list (the last entry)


def _best_logits(param):
    return [0.5, 2.0, 1.0, 0.0] if param == "logits" else _input("answer_ranked_low")


def _probe_bad_best(ns):
    fn = function(ns, "best_temperature_for_token")
    outs = []
    for param, args in BAD_BEST:
        try:
            outs.append({"param": param, "args": repr(args), "out": fn(_best_logits(param), *args)})
        except NotImplementedError:
            raise
        except Exception as e:  # the contract requires ValueError: judged by the parent
            outs.append({"param": param, "args": repr(args), "out": raised(e)})
    return outs


def _judge_bad_best(obs):
    for (param, args), o in zip(BAD_BEST, obs):
        call = f"best_temperature_for_token(logits, *{args!r})"
        reference_rejects(ref.best_temperature_for_token, (_best_logits(param), *args), {}, call)
        _value_error(o["out"], param, call)


# ---------------------------------------------------------------- the tests

CANBERRA = 5     # ' Canberra' in answer_ranked_low (ranked 4th)
SYDNEY = 2       # the argmax of answer_ranked_low
THE_MASKED = 1   # ' the' in masked_logits is -inf

TESTS = [
    CHECK_TESTS,
    Test(LAB, "softmax_is_stable", "softmax over the last dim: stable, +-inf rules, NaN rejected",
         _stable_cases("softmax", lambda x: ref.softmax(x), SOFTMAX_HINTS, atol=1e-6, rtol=1e-5)),
    Test(LAB, "log_softmax_is_stable", "log_softmax = x - max - logsumexp: finite where softmax is positive",
         _stable_cases("log_softmax", lambda x: ref.log_softmax(x), LOG_SOFTMAX_HINTS, atol=1e-5, rtol=1e-5)),
    Test(LAB, "greedy_token_ids_break_ties_low", "greedy_token_ids: argmax over the last dim, lowest id on ties", (
        _greedy_case("peaked_argmax", "peaked", "The greedy id is the index of the largest logit (torch.argmax "
                     "over dim=-1).", visible=True),
        _greedy_case("exact_tie_goes_to_lowest_id", "ties", "Two logits are equal; the contract says the lowest "
                     "id wins (torch.argmax returns the first maximum)."),
        _greedy_case("batch_shape_2_3_v", "batch_2_3_v", "Take the argmax over the last dimension only: "
                     "(2, 3, V) logits give a (2, 3) LongTensor.", fixture=None),
        _greedy_case("pos_inf_rows", "pos_inf_rows", "+inf is the largest value; with two, the lower id wins.",
                     fixture="pos_inf_logit"),
        Case("nan_rejected", 1, _call_expecting_error("greedy_token_ids", "nan_in_batch", ()),
             _judge_error("greedy_token_ids", "logits", "logits with a NaN", "nan_in_batch"), fixture="nan_logits",
             hint="torch.argmax treats NaN as the maximum: check torch.isnan(logits).any() first."),
    )),
    Test(LAB, "temperature_scales_logits", "apply_temperature with T > 0 divides the logits and returns a new tensor", (
        _scaled_case("divides_logits_by_t", "peaked", 2.0, AFTER_SOFTMAX, visible=True),
        _scaled_case("low_t_sharpens", "flat", 0.25, AFTER_SOFTMAX, visible=True),
        _scaled_case("integer_temperature", "answer_ranked_low", 3, "An int temperature is a number too: "
                     "divide by float(temperature)."),
        _scaled_case("batch_shape_2_3_v", "batch_2_3_v", 0.7, "Divide every entry; the shape stays (2, 3, V) and "
                     "-inf stays -inf.", fixture=None),
        _scaled_case("masked_stay_masked", "masked_logits", 0.5, "-inf / T is still -inf: a removed token stays "
                     "removed."),
        _scaled_case("t_one_returns_a_copy", "peaked", 1.0, "T = 1 changes no value, but still return a new "
                     "tensor (logits / 1.0 or logits.clone())."),
    )),
    Test(LAB, "temperature_zero_is_greedy", "apply_temperature(logits, 0): -inf except the argmax, no NaN", (
        _zero_case("zero_keeps_only_argmax", "peaked", ZERO_HINT, visible=True),
        _zero_case("zero_tie_keeps_lowest_id", "ties", "Two logits tie for the max: keep only the lower id, so "
                   "softmax of the result is one-hot."),
        _zero_case("integer_zero", "answer_ranked_low", "temperature=0 (an int) is greedy too.", temperature=0),
        _zero_case("zero_on_batch_2_3_v", "batch_2_3_v", "Pick the argmax per row over the last dimension; the "
                   "result keeps the shape (2, 3, V).", fixture=None),
        _zero_case("zero_with_extreme_logits", "extreme_logits", ZERO_HINT),
        Case("tiny_t_agrees_with_zero", 1, _probe_tiny_vs_zero, _judge_tiny_vs_zero, fixture="answer_ranked_low",
             hint="T = 1e-6 divides (huge but finite values); T = 0 keeps the argmax; both choose the same token."),
    )),
    Test(LAB, "temperature_rejects_invalid", "negative, NaN, infinite or non-number temperatures raise ValueError", tuple(
        Case(name, 1, _call_expecting_error("apply_temperature", "peaked", *args),
             _judge_bad_temperature(args), visible=(name == "negative_rejected"), fixture="peaked",
             hint="Validate first: if the type is wrong (bool is not accepted), or temperature is NaN, infinite or "
             "< 0, raise ValueError(f\"`temperature` must be a finite number >= 0, got {temperature!r}.\").")
        for name, args in BAD_TEMPERATURES.items())),
    Test(LAB, "entropy_in_nats", "entropy in nats over the last dim, 0 log 0 = 0, inputs validated", (
        _entropy_case("uniform_is_log_v", "uniform_probs", ENTROPY_NATS, visible=True, fixture="uniform_row"),
        _entropy_case("peaked_matches_reference", "peaked_probs", "H(p) = -sum_i p_i log p_i over the last "
                      "dimension.", visible=True, fixture="peaked"),
        _entropy_case("one_hot_is_zero", "one_hot_probs", ENTROPY_ZERO),
        _entropy_case("zeros_from_masked_tokens", "masked_probs", ENTROPY_ZERO, fixture="masked_logits"),
        _entropy_case("batch_shape_2_3", "batch_probs", "Sum over the last dimension only: (2, 3, V) "
                      "probabilities give a (2, 3) entropy."),
        _entropy_case("sum_within_tolerance_accepted", "slightly_off_probs", "Rows may sum to 1 within 1e-4 "
                      "(float rounding); only reject larger errors."),
        Case("invalid_probs_rejected", 1, _probe_bad_probs, _judge_bad_probs,
             hint="Raise ValueError naming `probs` for negative entries, NaN, or rows not summing to 1 within 1e-4."),
    )),
    Test(LAB, "experiment_record_filled", "run_experiment returns a filled ExperimentRecord with the right finish reason", (
        _record_case("greedy_stops_on_eos", "eos_at_step_3", visible=True, temperature=0.0, seed=None, max_tokens=8),
        _record_case("length_when_max_tokens_reached", "eos_at_step_3", temperature=0.0, seed=None, max_tokens=1,
                     hint="Stop after max_tokens tokens with finish_reason `length`; call the model no more."),
        _record_case("eos_on_last_allowed_token_is_stop", "eos_at_step_3", temperature=0.0, seed=None, max_tokens=4,
                     hint="EOS as the last allowed token is still `stop`: check EOS before max_tokens."),
        _record_case("greedy_records_no_seed", "eos_or_length", temperature=0, seed=5, max_tokens=6,
                     hint="At T == 0 the run is greedy and needs no seed: record seed=None."),
        _record_case("sampled_record_fields", "eos_or_length", temperature=0.8, seed=3, max_tokens=6),
        _record_case("sampled_run_cut_by_max_tokens", "eos_or_length", temperature=1.5, seed=1, max_tokens=3),
        Case("invalid_arguments_rejected", 1, _probe_bad_run_args, _judge_bad_run_args, fixture="eos_at_step_3",
             hint="Validate up front: max_tokens an int >= 1, seed an int when temperature > 0, temperature as in "
             "apply_temperature; raise ValueError naming the parameter."),
    )),
    Test(LAB, "sampling_is_seeded", "sampled runs use their own torch.Generator seeded by `seed`", (
        Case("same_seed_same_tokens", 1, _probe_same_seed, _judge_same_seed, visible=True,
             fixture="eos_or_length", hint=SEED_HINT),
        Case("global_seed_does_not_matter", 1, _probe_global_seed, _judge_global_seed, fixture="eos_or_length",
             hint=SEED_HINT),
        Case("global_rng_untouched", 1, _probe_rng_untouched, _judge_rng_untouched, fixture="eos_or_length",
             hint=SEED_HINT),
        Case("matches_documented_sampler", 1, _probe_recipe, _judge_recipe, fixture="eos_or_length",
             hint=SEED_HINT),
        Case("different_seeds_differ", 1, _probe_seeds_differ, _judge_seeds_differ, fixture="eos_or_length",
             hint=SEED_HINT),
    )),
    Test(LAB, "best_temperature_is_found", "the most probability any listed temperature gives one token", (
        _best_case("low_ranked_answer", "answer_ranked_low", CANBERRA, "Try every temperature in the list: "
                   "p = softmax(apply_temperature(logits, T))[token_id]; keep the largest (first on ties).",
                   visible=True),
        _best_case("argmax_token_best_at_zero", "answer_ranked_low", SYDNEY, "The argmax token gets probability "
                   "1 at T = 0; exact ties go to the first temperature in the list (given here as a tuple). "
                   "Token id 0 is a valid id too.", as_tuple=True, also_token=0),
        _best_case("masked_token_never_likely", "masked_logits", THE_MASKED, "A -inf token has probability 0 at "
                   "every T: all tie, so return the first temperature in the list with probability 0.0."),
        Case("invalid_arguments_rejected", 1, _probe_bad_best, _judge_bad_best, fixture="answer_ranked_low",
             hint="Raise ValueError naming `token_id` (out of range), `temperatures` (empty) or `temperature` "
             "(a bad value in the list; apply_temperature already checks it)."),
    )),
]
