"""lab01's probes: they run in the student's process and return plain data. No reference here.

A probe is a public function whose first parameter is `ns` (the student's namespace); its
other arguments are plain values (input names, temperatures, keys of the tables below),
so the grading process can name a call without sending the student a tensor or an
expected value. The tables and `inputs()` are shared with the tests, so probe and judge
build the same tensors.
"""
from __future__ import annotations

import math

import torch

import course

from autograder.core import function, raised, same_values

INF = math.inf


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


def _batch_probs():
    x = _batch()  # (2, 3, V)
    x = torch.where(torch.isinf(x), torch.full_like(x, -30.0), x)  # finite rows for torch.softmax
    p = torch.softmax(x, dim=-1)
    p[1, 2] = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # one one-hot row
    return p  # (2, 3, V)


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
    "batch_probs": _batch_probs,
    "slightly_off_probs": lambda: torch.tensor([0.5, 0.25, 0.25 + 5e-5]),
}


def inputs(name):
    """A fresh copy of the input `name`."""
    return INPUTS[name]()


VALID_LOGITS = ("peaked", "masked_logits", "pos_inf_rows", "batch_2_3_v", "extreme_logits", "one_token_vocab")

# check_logits inputs that must be rejected: table -> ((label, make), ...)
BAD_LOGITS = {
    "nan": (("one NaN", lambda: _fx("nan_logits")), ("a NaN in a batch", lambda: INPUTS["nan_in_batch"]())),
    "all_masked": (("a row of only -inf", lambda: INPUTS["all_masked_row"]()),
                   ("a 1-D all -inf vector", lambda: torch.full((4,), -INF))),
    "wrong_types": (("a Python list", lambda: [1.0, 2.0]), ("an int64 tensor", lambda: torch.tensor([1, 2, 3])),
                    ("a 0-d tensor", lambda: torch.tensor(1.0)), ("an empty last dimension", lambda: torch.empty(2, 0))),
}

BAD_TEMPERATURES = {
    "negative_rejected": [(-1.0,), (-1e-9,)],
    "nan_rejected": [(math.nan,)],
    "inf_rejected": [(INF,), (-INF,)],
    "non_number_rejected": [("1.0",), (None,), (True,), ([1.0],)],
}

BAD_PROBS = (("negative entry", lambda: torch.tensor([0.5, 0.7, -0.2])),
             ("a row summing to 0.9", lambda: torch.tensor([[0.5, 0.5], [0.45, 0.45]])),
             ("NaN", lambda: torch.tensor([0.5, math.nan, 0.5])),
             ("a Python list", lambda: [0.5, 0.5]))

BAD_RUN_ARGS = (("max_tokens", {"temperature": 0.0, "seed": None, "max_tokens": 0}),
                ("max_tokens", {"temperature": 1.0, "seed": 1, "max_tokens": 2.5}),
                ("max_tokens", {"temperature": 0.0, "seed": None, "max_tokens": True}),
                ("seed", {"temperature": 1.0, "seed": None, "max_tokens": 3}),
                ("seed", {"temperature": 1.0, "seed": True, "max_tokens": 3}),
                ("temperature", {"temperature": -0.5, "seed": 1, "max_tokens": 3}))

BAD_BEST = (("token_id", (9, [1.0])), ("token_id", (-1, [1.0])), ("token_id", (True, [1.0])),
            ("temperatures", (3, [])), ("temperatures", (3, 1.0)), ("temperature", (3, [1.0, -2.0])),
            ("logits", (3, [1.0])))   # logits given as a Python list (the last entry)

SAMPLED = {"temperature": 1.5, "max_tokens": 6}


def best_logits(param):
    return [0.5, 2.0, 1.0, 0.0] if param == "logits" else inputs("answer_ranked_low")


# ---------------------------------------------------------------- probes

def call(ns, fn_name: str, input_name: str, *args) -> dict:
    """fn(input, *args): what came back, whether the input kept its values, whether the
    result shares the input's storage. Exceptions propagate (the harness reports them)."""
    fn = function(ns, fn_name)
    x = inputs(input_name)
    before = x.clone()
    out = fn(x, *args)
    shares = isinstance(out, torch.Tensor) and (out is x or (out.numel() > 0 and out.data_ptr() == x.data_ptr()))
    return {"out": out, "unchanged": same_values(x, before), "shares_input": bool(shares)}


def _outcomes(fn, calls):
    outs = []
    for extra, make_args in calls:
        try:
            outs.append({**extra, "out": fn(*make_args())})
        except NotImplementedError:
            raise
        except Exception as e:  # the contract requires an error: judged by the parent
            outs.append({**extra, "out": raised(e)})
    return outs


def call_expecting_error(ns, fn_name: str, input_name: str) -> list:
    """fn(input): what came back or was raised."""
    return _outcomes(function(ns, fn_name), [({"args": "()"}, lambda: (inputs(input_name),))])


def bad_temperatures(ns, key: str) -> list:
    """apply_temperature(peaked, T) for each T of BAD_TEMPERATURES[key]."""
    return _outcomes(function(ns, "apply_temperature"),
                     [({"args": repr(args)}, lambda args=args: (inputs("peaked"), *args))
                      for args in BAD_TEMPERATURES[key]])


def check_valid(ns) -> dict:
    fn = function(ns, "check_logits")
    outs = {}
    for name in VALID_LOGITS:
        x = inputs(name)
        before = x.clone()
        outs[name] = {"out": fn(x), "unchanged": same_values(x, before)}
    return outs


def check_bad(ns, key: str) -> list:
    return _outcomes(function(ns, "check_logits"),
                     [({"label": label}, lambda make=make: (make(),)) for label, make in BAD_LOGITS[key]])


def tiny_vs_zero(ns) -> dict:
    fn = function(ns, "apply_temperature")
    x = inputs("answer_batch")
    return {"tiny": fn(x.clone(), 1e-6), "zero": fn(x.clone(), 0.0)}


def bad_probs(ns) -> list:
    return _outcomes(function(ns, "entropy"), [({"label": label}, lambda make=make: (make(),))
                                               for label, make in BAD_PROBS])


def experiment(ns, fixture: str, temperature, seed, max_tokens) -> dict:
    fn = function(ns, "run_experiment")
    rec = fn(course.ScriptedModel(fixture), temperature=temperature, seed=seed, max_tokens=max_tokens)
    is_record = isinstance(rec, course.ExperimentRecord)
    return {"type": type(rec).__name__, "is_record": is_record, "record": rec.to_dict() if is_record else None}


def bad_run_args(ns) -> list:
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


# -- seeded sampling: every probe puts the global RNG back (the student's kernel keeps its own)

def _tokens(fn, seed, temperature=SAMPLED["temperature"]):
    rec = fn(course.ScriptedModel("eos_or_length"), temperature=temperature, seed=seed,
             max_tokens=SAMPLED["max_tokens"])
    return rec.tokens if isinstance(rec, course.ExperimentRecord) else {"not_a_record": type(rec).__name__}


def _keep_global_rng(probe):
    def run(ns):
        state = torch.get_rng_state()
        try:
            return probe(function(ns, "run_experiment"))
        finally:
            torch.set_rng_state(state)
    return run


def _same_seed(fn):
    out = {}
    for key, global_seed in (("first", 1), ("second", 2)):
        torch.manual_seed(global_seed)  # a run that draws from the global RNG differs; no luck involved
        out[key] = _tokens(fn, 7)
    return out


def _global_seed(fn):
    out = []
    for global_seed in (0, 12345, 2024):
        torch.manual_seed(global_seed)
        out.append(_tokens(fn, 7))
    return out


def _rng_untouched(fn):
    torch.manual_seed(99)
    before = torch.get_rng_state()
    _tokens(fn, 3)
    return {"untouched": bool(torch.equal(before, torch.get_rng_state()))}


def _recipe(fn):
    return {str(s): _tokens(fn, s) for s in range(6)}


def _seeds_differ(fn):
    return [_tokens(fn, s) for s in (0, 1, 2, 3, 4, 5, 6, 7)]


SAMPLING = {"same_seed": _same_seed, "global_seed": _global_seed, "rng_untouched": _rng_untouched,
            "recipe": _recipe, "seeds_differ": _seeds_differ}


def sampling(ns, key: str):
    """One of the seeded-sampling observations (SAMPLING[key]) of run_experiment."""
    return _keep_global_rng(SAMPLING[key])(ns)


# -- best_temperature_for_token

def best(ns, input_name: str, token_id: int, temperatures: list, as_tuple: bool = False,
         also_token: int | None = None) -> dict:
    """best_temperature_for_token(input, token_id, temperatures) (a tuple when as_tuple);
    with also_token, the same call for a second token id too."""
    fn = function(ns, "best_temperature_for_token")

    def one(token):
        x = inputs(input_name)
        before = x.clone()
        out = fn(x, token, tuple(temperatures) if as_tuple else list(temperatures))  # both are allowed
        return {"out": out, "unchanged": same_values(x, before)}

    main = one(token_id)
    return main if also_token is None else {"main": main, "also": one(also_token)}


def bad_best(ns) -> list:
    fn = function(ns, "best_temperature_for_token")
    outs = []
    for param, args in BAD_BEST:
        try:
            outs.append({"param": param, "args": repr(args), "out": fn(best_logits(param), *args)})
        except NotImplementedError:
            raise
        except Exception as e:  # the contract requires ValueError: judged by the parent
            outs.append({"param": param, "args": repr(args), "out": raised(e)})
    return outs
