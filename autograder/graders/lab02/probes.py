"""lab02's probes: they run in the student's process and return plain data. No reference here.

The inputs of every case are built here from fixed fixtures and seeds, named by plain keys
(the tables below), so the tests build the very same tensors when they judge:

    FILTER_CALLS[case key]     -> [(make_input, kwargs), ...]  one filter call each
    INVALID_CALLS[case key]    -> (make_input, [(parameter, kwargs), ...], extra kwargs)

A probe is a public function whose first parameter is `ns` (the student's namespace).
"""
from __future__ import annotations

import copy
import math

import torch

import course

from autograder.checks import Input, record
from autograder.core import function, raised

N_DRAWS = 40_000


# ---------------------------------------------------------------- inputs

def named(label, make):
    """An input maker with a label for messages, e.g. "fixture 'flat'"."""
    make.label = label
    return make


def fx(name, step=0):
    return named(f"fixture {name!r}", lambda: course.load_fixture(name).logits(step))


def fx_all(name):
    return named(f"fixture {name!r} (all steps)", lambda: course.load_fixture(name).logits())


def stack(*makers):
    return named("a batch of " + " + ".join(m.label for m in makers),
                 lambda: torch.stack([m() for m in makers]))


def rand(seed, rows=16, vocab=40, scale=3.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        return torch.randn(rows, vocab, generator=g) * scale
    return named(f"random ({rows}, {vocab}) logits, seed {seed}", make)


def probs_log(*p):
    return named(f"log of probabilities {list(p)}", lambda: torch.log(torch.tensor(p, dtype=torch.float32)))


def const(values):
    return named(f"logits {values}", lambda: torch.tensor(values, dtype=torch.float32))


def mapped(make, f, label):
    return named(label, lambda: f(make()))


def float64(make):
    """The same logits as float64: a filter returns the input's dtype."""
    return mapped(make, lambda x: x.double(), f"{make.label} as float64")


def _long_tail_masked():
    """long_tail with all but its 5 most likely tokens already removed (-inf)."""
    x = course.load_fixture("long_tail").logits(0)
    rank = torch.argsort(torch.argsort(x, descending=True, stable=True))
    return x.masked_fill(rank >= 5, -math.inf)


long_tail_masked = named("fixture 'long_tail' with all but 5 tokens at -inf", _long_tail_masked)


def _alternating():
    """Even rows: long_tail with only its top 5 tokens; odd rows: flat. (N_DRAWS, V=8)"""
    flat = course.load_fixture("flat").logits(0)
    peaky = torch.tensor([3.0, 1.0, 0.0, -1.0, -math.inf, 2.0, 0.5, -math.inf])
    return torch.stack([peaky, flat]).repeat(N_DRAWS // 2, 1)


def sampling_input():
    return rand(41, rows=64, vocab=10, scale=1.0)()


CONFIGS = [dict(temperature=0.7, top_k=5, top_p=0.9), dict(temperature=1.5, top_k=None, top_p=0.8),
           dict(temperature=2.0, top_k=3, top_p=1.0), dict(temperature=0.5, top_k=None, top_p=0.6),
           dict(temperature=1.0, top_k=10, top_p=0.95)]

FILTER_CALLS = {
    # top_k_filter
    "top_k/keeps_k_largest": [(fx("long_tail"), dict(top_k=5)), (fx("flat"), dict(top_k=3))],
    "top_k/one_keeps_only_the_max": [(fx("peaked"), dict(top_k=1)), (fx("extreme_logits"), dict(top_k=2))],
    "top_k/ties_at_kth_value_all_kept": [(fx("ties"), dict(top_k=1)), (fx("uniform_row"), dict(top_k=2))],
    "top_k/k_at_least_vocab_keeps_all": [(fx("flat"), dict(top_k=8)), (fx("flat"), dict(top_k=50)),
                                         (fx("masked_logits"), dict(top_k=7)),
                                         (const([[2.5], [-1.0]]), dict(top_k=3))],   # V = 1: always kept
    "top_k/batch_rows_independent": [(stack(fx("peaked"), fx("flat"), fx("ties")), dict(top_k=2))],
    "top_k/matches_transformers": [(rand(11), dict(top_k=1)), (rand(12), dict(top_k=7)),
                                   (rand(13, vocab=64), dict(top_k=63))],
    "top_k/input_not_modified_new_tensor": [(fx("long_tail"), dict(top_k=3)), (rand(14), dict(top_k=100)),
                                            (float64(fx("long_tail")), dict(top_k=3))],
    # top_p_filter
    "top_p/exact_boundary_keeps_two": [(fx("top_p_exact_boundary"), dict(top_p=0.75))],
    "top_p/crossing_token_kept": [(fx("long_tail"), dict(top_p=0.9)), (fx("flat"), dict(top_p=0.5)),
                                  (probs_log(0.5, 0.3, 0.15, 0.05), dict(top_p=0.6))],
    "top_p/ties_at_boundary_lowest_id_first": [(fx("ties"), dict(top_p=0.05)), (fx("uniform_row"), dict(top_p=0.5)),
                                               (const([[0.0] * 6]), dict(top_p=0.2)),
                                               # 128 equal logits: torch's unstable sort reorders ties this wide
                                               (named("(2, 128) equal logits", lambda: torch.zeros(2, 128)),
                                                dict(top_p=0.1))],
    "top_p/batch_rows_get_own_cutoff": [(stack(fx("peaked"), fx("flat"), fx("ties")), dict(top_p=0.8)),
                                        (rand(21, rows=6, vocab=12, scale=2.0), dict(top_p=0.7))],
    "top_p/extreme_logits": [(fx("extreme_logits"), dict(top_p=0.9)),
                             (mapped(fx("flat"), lambda x: x + 100, "fixture 'flat' + 100"), dict(top_p=0.7)),
                             (mapped(fx("flat"), lambda x: 1000 * x, "1000 * fixture 'flat'"), dict(top_p=0.7))],
    "top_p/masked_tokens_stay_removed": [(fx("masked_logits"), dict(top_p=0.95)), (long_tail_masked, dict(top_p=0.99)),
                                         (long_tail_masked, dict(top_p=1.0))],
    "top_p/min_tokens_to_keep": [(fx("peaked"), dict(top_p=0.5, min_tokens_to_keep=3)),
                                 (fx("top_p_exact_boundary"), dict(top_p=0.75, min_tokens_to_keep=4)),
                                 (fx("flat"), dict(top_p=0.3, min_tokens_to_keep=20))],
    "top_p/p_equal_one_keeps_all": [(fx("long_tail"), dict(top_p=1.0)),
                                    (const([[0.0, 0.0, -200.0, 1.0, -math.inf]]), dict(top_p=1)),
                                    (fx("masked_logits"), dict(top_p=1.0))],
    "top_p/matches_transformers": [(rand(31), dict(top_p=0.9)), (rand(32), dict(top_p=0.5)),
                                   (rand(33, vocab=64), dict(top_p=0.95)), (rand(34, scale=1.0), dict(top_p=0.3))],
    "top_p/input_not_modified_new_tensor": [(fx("long_tail"), dict(top_p=0.9)), (fx("flat", 0), dict(top_p=0.5)),
                                            (rand(35), dict(top_p=0.8)), (float64(fx("long_tail")), dict(top_p=0.9))],
    # filter_logits
    "pipeline/long_tail_t07_k5_p09": [(fx("long_tail"), dict(temperature=0.7, top_k=5, top_p=0.9))],
    "pipeline/fixtures_several_settings": [(fx_all(n), cfg) for n in ("peaked", "flat", "extreme_logits",
                                                                     "masked_logits", "json_bracket_risk")
                                          for cfg in CONFIGS[:3]],
    "pipeline/random_logits_batches": [(rand(50 + i, rows=8, vocab=64), cfg) for i, cfg in enumerate(CONFIGS)],
    "pipeline/top_k_before_top_p": [(probs_log(0.4, 0.3, 0.2, 0.1), dict(top_k=2, top_p=0.5))],
    "pipeline/temperature_before_filters": [(fx("long_tail"), dict(temperature=2.0, top_p=0.9)),
                                            (fx("long_tail"), dict(temperature=0.5, top_k=3, top_p=0.8))],
    "pipeline/knobs_off_keep_distribution": [(fx("long_tail"), dict()), (rand(60), dict(top_p=1.0))],
    "pipeline/input_not_modified": [(fx("long_tail"), dict(temperature=0.5, top_p=0.9)),
                                    (rand(61), dict(temperature=2.0, top_k=4))],
}

INVALID_CALLS = {
    "top_k/invalid_k_rejected": (fx("flat"), [("top_k", dict(top_k=0)), ("top_k", dict(top_k=-2)),
                                              ("top_k", dict(top_k=2.5)), ("top_k", dict(top_k=None)),
                                              ("top_k", dict(top_k="3")), ("top_k", dict(top_k=True))], None),
    "top_p/invalid_parameters_rejected": (fx("flat"), [
        ("top_p", dict(top_p=0)), ("top_p", dict(top_p=-0.5)), ("top_p", dict(top_p=1.5)),
        ("top_p", dict(top_p=math.nan)), ("top_p", dict(top_p="0.9")), ("top_p", dict(top_p=None)),
        ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=0)),
        ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=-1)),
        ("min_tokens_to_keep", dict(top_p=0.9, min_tokens_to_keep=1.5))], None),
    "pipeline/invalid_parameters_rejected": (fx("flat"), [
        ("temperature", dict(temperature=0.0)), ("temperature", dict(temperature=-1.0)),
        ("temperature", dict(temperature=math.nan)), ("temperature", dict(temperature=math.inf)),
        ("temperature", dict(temperature="1.0")), ("top_k", dict(top_k=0)),
        ("top_k", dict(top_k=2.5)), ("top_p", dict(top_p=0.0)), ("top_p", dict(top_p=1.5))], None),
}

FREQUENCY_INPUTS = {"long_tail": (fx("long_tail"), 3), "masked_tail": (long_tail_masked, 4),
                    "alternating": (named("alternating rows", _alternating), 5)}


def invalid_calls(key):
    """[(make_input, kwargs)] of an INVALID_CALLS entry: each bad parameter with the extra kwargs."""
    make, bad, extra = INVALID_CALLS[key]
    return [(make, dict(kwargs, **(extra or {}))) for _, kwargs in bad]


# ---------------------------------------------------------------- probes

def _records(ns, fn_name, calls):
    """checks.record of fn(input, **kwargs) per call: each result, whether the input changed,
    and whether the input object itself came back."""
    fn = function(ns, fn_name)
    inputs = [Input(getattr(make, "label", "logits"), make, kwargs) for make, kwargs in calls]
    # a deep copy: a student who changes a list argument in place cannot change what the judge sees
    return [record(fn, i.args(), copy.deepcopy(dict(i.kwargs))) for i in inputs]


def filtered(ns, fn_name: str, key: str) -> list:
    """fn_name on every call of FILTER_CALLS[key], recorded."""
    return _records(ns, fn_name, FILTER_CALLS[key])


def invalid(ns, fn_name: str, key: str) -> list:
    """fn_name on every bad call of INVALID_CALLS[key], recorded."""
    return _records(ns, fn_name, invalid_calls(key))


def same_seed(ns) -> dict:
    fn = function(ns, "sample_token")
    x = sampling_input()
    a = fn(x, torch.Generator().manual_seed(2024))
    b = fn(x, torch.Generator().manual_seed(2024))
    return {"a": a, "b": b}


def generator_state(ns) -> dict:
    fn = function(ns, "sample_token")
    g = torch.Generator().manual_seed(7)
    before = g.get_state()
    fn(sampling_input(), g)
    return {"advanced": not torch.equal(before, g.get_state())}


def global_rng(ns) -> dict:
    fn = function(ns, "sample_token")
    saved = torch.get_rng_state()
    try:
        x = sampling_input()
        torch.manual_seed(1)
        global_before = torch.get_rng_state()
        a = fn(x, torch.Generator().manual_seed(99))
        global_unchanged = bool(torch.equal(global_before, torch.get_rng_state()))
        torch.manual_seed(12345)  # a different global state must not change the draw
        b = fn(x, torch.Generator().manual_seed(99))
    finally:
        torch.set_rng_state(saved)
    return {"global_unchanged": global_unchanged, "a": a, "b": b}


def rows(ns):
    fn = function(ns, "sample_token")
    x = torch.full((3, 6), -math.inf)
    x[0, 4] = x[1, 1] = x[2, 5] = 0.0   # each row allows exactly one token
    return fn(x, torch.Generator().manual_seed(0))


def masked_and_extreme(ns) -> dict:
    fn = function(ns, "sample_token")
    g = torch.Generator().manual_seed(5)
    masked = fn(course.load_fixture("masked_logits").logits(0).expand(4000, -1).clone(), g)
    extreme = fn(course.load_fixture("extreme_logits").logits(0).expand(4000, -1).clone(), g)
    return {"masked": masked, "extreme": extreme}


def invalid_generator(ns) -> list:
    fn = function(ns, "sample_token")
    out = []
    for g in (None, 1234, "seed"):
        try:
            fn(torch.zeros(2, 4), g)
            out.append("returned")
        except Exception as e:
            out.append(raised(e))
    return out


def frequencies(ns, key: str):
    """sample_token on N_DRAWS rows of FREQUENCY_INPUTS[key] with its fixed seed."""
    make, seed = FREQUENCY_INPUTS[key]
    fn = function(ns, "sample_token")
    x = make()
    return fn(x.expand(N_DRAWS, -1).clone() if x.dim() == 1 else x, torch.Generator().manual_seed(seed))
