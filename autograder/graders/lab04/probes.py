"""lab04's probes: they run in the student's process and return plain data. No reference here.

The loops run on the deterministic toys of autograder/toy_models.py (a `Recorder` logs
what each model call was fed and charges FakeClock time per call) and on the shipped tiny
model. Every probe runs torch on one thread (checks.one_thread) and is named by plain
keys into the tables below, which the tests read to judge the same calls.

A probe is a public function whose first parameter is `ns` (the student's namespace).
"""
from __future__ import annotations

import copy
from functools import lru_cache

import torch

import course

from autograder import checks
from autograder.checks import record, shipped_model, one_thread
from autograder.core import function
from ._quality_inputs import QUALITY, QUALITY_BAD, REGRESS, REGRESS_BAD, _quality_set
from autograder.toy_models import TOY_EOS, TOY_EOS_PROMPT, TOY_PROMPT, Recorder, ToyBidirectionalLM, ToyCausalLM, ids


# ================================================================= the shipped model (an input)

class _HFForward:
    """The transformers model as a plain callable: ids (1, T) -> logits (1, T, V)."""

    def __init__(self, hf):
        self.hf = hf

    @torch.no_grad()
    def __call__(self, input_ids):
        return self.hf(input_ids).logits


SHIPPED_PROMPT = 1   # LAB_PROMPTS[1], a tool-call prompt of more than a dozen tokens


@lru_cache(maxsize=1)
def _shipped():
    """(forward, decoder, prompt ids, eos) of the shipped tiny model on the CPU, loaded once.

    forward is the transformers model itself, decoder the course's CourseDecoder with the
    same weights: a cached loop on the one must give the tokens of an uncached loop on the other.
    """
    from course.decoder import CourseDecoder
    from course.tiny_model import LAB_PROMPTS

    hf, tokenizer = shipped_model()
    prompt = [int(t) for t in tokenizer.encode(LAB_PROMPTS[SHIPPED_PROMPT])]
    return _HFForward(hf), CourseDecoder.from_pretrained(hf), prompt, int(tokenizer.eos_token_id)


def shipped_forward():
    return _shipped()[0]


def shipped_decoder():
    return _shipped()[1]


def shipped_prompt():
    return list(_shipped()[2])


def shipped_eos():
    return _shipped()[3]


# ================================================================= inputs

TOY_B = list(TOY_PROMPT)
TOY_B[2] = 8           # change position 2 of 6: the toy's rows then differ by 0, 0, 12, 12, 9, 11
STRICT_ATOL = 11.0     # exactly the change at the last position: `>` leaves it out, `>=` keeps it
CLOCK_START = 10.0     # the server's clock does not start at 0
QUEUE = CLOCK_START - 2.25   # the request waited 2.25 s before the server picked it up


class _NoGradForward:
    """A model as a plain callable without autograd: ids (1, T) -> logits (1, T, V)."""

    def __init__(self, model):
        self.model = model

    @torch.no_grad()
    def __call__(self, input_ids):
        return self.model(input_ids)


def tiny_decoder_forward():
    """The tiny model's weights in the course's decoder, read from its files (no transformers
    import: the changed-positions cases, the visible one among them, start seconds sooner)."""
    return _NoGradForward(checks.shipped_decoder()[0])


def tiny_prompt():
    """LAB_PROMPTS[SHIPPED_PROMPT] in token ids (the same ids as shipped_prompt())."""
    from course.tiny_model import LAB_PROMPTS
    return [int(t) for t in checks.shipped_decoder()[1].encode(LAB_PROMPTS[SHIPPED_PROMPT]).ids]


def changed_tiny_inputs(where):
    a = tiny_prompt()
    position = len(a) // 2 if where == "middle" else len(a) - 1
    b = list(a)
    b[position] = (b[position] + 1) % 50  # a different, ordinary token
    return a, b


class FaintToyLM(ToyCausalLM):
    """The causal toy with its logits scaled by 1e-6: on TOY_PROMPT vs TOY_B its rows differ by
    0, 0, 1.2e-5, 1.2e-5, 9e-6, 1.1e-5, on either side of changed_positions' default atol (1e-5)."""

    def __call__(self, input_ids):
        return super().__call__(input_ids) * 1e-6            # (B, T, V)


MODELS = {"toy": ToyCausalLM, "bidirectional": ToyBidirectionalLM, "faint": FaintToyLM,
          "tiny_decoder": tiny_decoder_forward}
DEFAULT_ATOL = None    # in CHANGED: the call leaves atol out, so the signature's default applies


def changed_args(model, a, b, atol) -> tuple:
    """changed_positions' positional arguments; atol left out when it is DEFAULT_ATOL."""
    return (model, ids(a), ids(b)) if atol is DEFAULT_ATOL else (model, ids(a), ids(b), atol)


# changed_positions: case -> (model, () -> (a tokens, b tokens), atol or DEFAULT_ATOL)
CHANGED = {
    "tiny_model_change_middle_token": ("tiny_decoder", lambda: changed_tiny_inputs("middle"), 1e-5),
    "change_last_token": ("tiny_decoder", lambda: changed_tiny_inputs("last"), 1e-5),
    "identical_inputs_change_nothing": ("toy", lambda: (TOY_PROMPT, TOY_PROMPT), 0.0),
    "non_causal_model_changes_everywhere": ("bidirectional", lambda: (TOY_PROMPT, TOY_B), 1e-5),
    "atol_is_a_strict_bound": ("toy", lambda: (TOY_PROMPT, TOY_B), STRICT_ATOL),
    "default_atol_when_none_is_passed": ("faint", lambda: (TOY_PROMPT, TOY_B), DEFAULT_ATOL),
}

BAD_SHAPE = ("ids of 4 and of 3 tokens", lambda: (ToyCausalLM(), ids([1, 2, 3, 4]), ids([1, 2, 3]), 1e-5))

BAD_CHANGED = [   # (param, label, () -> args)
    ("input_ids", "1-D input_ids", lambda: (ToyCausalLM(), torch.tensor([1, 2, 3]), ids([1, 2, 3]), 1e-5)),
    ("other_ids", "float other_ids", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 3]).float(), 1e-5)),
    ("atol", "atol=-1.0", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), -1.0)),
    ("atol", "atol=nan", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), float("nan"))),
    ("atol", "atol=inf", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), float("inf"))),
    ("atol", "atol=True", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), True)),
]

PROMPTS = {"toy": TOY_PROMPT, "toy_one": TOY_PROMPT[:1], "toy_eos": TOY_EOS_PROMPT}
EOS = {None: None, "toy": TOY_EOS}

BAD_GENERATION = [   # (param, shown value, input_ids, eos_token_id)
    ("input_ids", "a 1-D prompt", lambda: torch.tensor(TOY_PROMPT), None),
    ("input_ids", "a float prompt", lambda: ids(TOY_PROMPT).float(), None),
    ("input_ids", "an empty (1, 0) prompt", lambda: torch.zeros(1, 0, dtype=torch.long), None),
    ("input_ids", "a (2, T) batch", lambda: torch.cat([ids(TOY_PROMPT), ids(TOY_PROMPT)]), None),
    ("input_ids", "a list of ids", lambda: [list(TOY_PROMPT)], None),
    ("eos_token_id", "eos_token_id=-1", lambda: ids(TOY_PROMPT), -1),
    ("eos_token_id", "eos_token_id=True", lambda: ids(TOY_PROMPT), True),
]

METRIC_KEYS = ("ttft", "tpot", "e2e")
SERVE_KEYS = ("tokens", "token_times", "ttft", "tpot", "e2e")
INF = float("inf")
NAN = float("nan")

# latency_metrics: case -> [(arrival, token_times)] or, for rejections, [(arrival, token_times, shown)]
METRICS = {
    "five_evenly_spaced_tokens": [(1.0, [1.5, 1.75, 2.0, 2.25, 2.5])],
    "uneven_gaps": [(0.0, [0.8, 0.9, 1.4, 1.45]), (7.5, (8.0, 8.125, 9.0))],
    "one_token_has_no_tpot": [(2.0, [2.5])],
    "equal_timestamps_allowed": [(3.0, [3.5, 3.5, 3.5]), (4.0, [4.0, 4.25])],
    "rejects_empty_token_times": [(0.0, [], [])],
    "rejects_time_going_back": [(0.0, [0.5, 0.75, 0.625], 0.625), (0.0, [0.75, 0.5], 0.5)],
    "rejects_negative_arrival": [(-1.5, [0.5], -1.5)],
    "rejects_token_before_arrival": [(2.0, [1.75, 2.5], 1.75)],
    "rejects_nan_timestamp": [(0.0, [0.5, NAN], NAN), (0.0, [0.5, INF], INF), (0.0, [-INF, 0.5], -INF),
                              (0.0, [0.5, True], True)],
}

# serve_request: case -> (prompt, max_new_tokens, arrival_time, eos)
SERVE = {
    "token_times_on_the_clock": (TOY_PROMPT, 5, QUEUE, None),
    "ttft_includes_queue": (TOY_PROMPT, 5, QUEUE, None),
    "tpot_per_decode_step": (TOY_PROMPT, 7, CLOCK_START, None),
    "eos_request": (TOY_EOS_PROMPT, 12, QUEUE, TOY_EOS),
    "single_token_request": (TOY_PROMPT, 1, QUEUE, None),
    "rejects_arrival_in_the_future": (TOY_PROMPT, 3, CLOCK_START + 2.5, None),
}


# ================================================================= probes

def changed(ns, key: str) -> dict:
    """changed_positions on the CHANGED[key] inputs, recorded."""
    model, tokens, atol = CHANGED[key]
    with one_thread():
        a, b = tokens()
        return record(function(ns, "changed_positions"), changed_args(MODELS[model](), a, b, atol))


def changed_rejects(ns, which: str) -> list:
    """changed_positions on the bad inputs: "shape" (BAD_SHAPE) or "ids_and_atol" (BAD_CHANGED)."""
    fn = function(ns, "changed_positions")
    makers = [BAD_SHAPE[1]] if which == "shape" else [make for _, _, make in BAD_CHANGED]
    with one_thread():
        return [record(fn, make()) for make in makers]


def uncached(ns, prompt: str, max_new: int, eos=None) -> dict:
    """generate_uncached(Recorder(model), prompt, max_new, eos): the record and the model calls.
    prompt "shipped" runs the tiny model on its prompt."""
    with one_thread():
        shipped = prompt == "shipped"
        model = Recorder(shipped_forward() if shipped else ToyCausalLM())
        rec = record(function(ns, "generate_uncached"),
                     (model, ids(shipped_prompt() if shipped else PROMPTS[prompt]), max_new, EOS[eos]))
        rec["events"] = model.events
        return rec


def bad_max_new(ns, fn_name: str, values: list) -> list:
    with one_thread():
        out = []
        for max_new in values:
            model = Recorder(ToyCausalLM())
            rec = record(function(ns, fn_name), (model, ids(TOY_PROMPT), max_new, None))
            rec["events"] = model.events
            out.append(rec)
        return out


def bad_generation(ns, fn_name: str) -> list:
    with one_thread():
        fn, out = function(ns, fn_name), []
        for _, _, make, eos in BAD_GENERATION:
            model = Recorder(ToyCausalLM())
            rec = record(fn, (model, make(), 4, eos))
            rec["events"] = model.events
            out.append(rec)
        return out


def cached(ns, prompt: str, max_new: int, eos=None, stream: bool = False, twice: bool = False) -> dict:
    """generate_cached(Recorder(toy), prompt, max_new, eos): the record and the decoder calls;
    stream: on_token logs each token among them; twice: the same decoder serves a second request."""
    with one_thread():
        fn = function(ns, "generate_cached")
        decoder = Recorder(ToyCausalLM())
        kwargs = {"on_token": lambda t: decoder.events.append(["token", t])} if stream else {}
        rec = record(fn, (decoder, ids(PROMPTS[prompt]), max_new, EOS[eos]), kwargs)
        rec["events"] = decoder.events
        if twice:  # the same decoder again: nothing may carry over from the first request
            rec["again"] = record(fn, (decoder, ids(PROMPTS[prompt]), max_new, EOS[eos]))["result"]
        return rec


def cached_tiny(ns, max_new: int, with_eos: bool) -> dict:
    with one_thread():
        decoder = Recorder(shipped_decoder())
        rec = record(function(ns, "generate_cached"),
                     (decoder, ids(shipped_prompt()), max_new, shipped_eos() if with_eos else None))
        rec["events"] = decoder.events
        return rec


def metrics(ns, key: str) -> list:
    """latency_metrics on each (arrival, times) of METRICS[key]; only the contract keys kept
    (floats may come as 0-d tensors)."""
    with one_thread():
        fn = function(ns, "latency_metrics")
        recs = [record(fn, (arrival, list(times) if isinstance(times, list) else times))
                for arrival, times, *_ in METRICS[key]]
        for rec in recs:
            out = rec["result"]
            if isinstance(out, dict) and "__raised__" not in out:
                rec["result"] = {k: (float(v) if isinstance(v, torch.Tensor) and v.dim() == 0 else v)
                                 for k, v in out.items() if k in METRIC_KEYS}
        return recs


def serve(ns, key: str) -> dict:
    """serve_request on a FakeClock starting at CLOCK_START, with SERVE[key]."""
    tokens, max_new, arrival, eos = SERVE[key]
    with one_thread():
        clock = course.FakeClock(CLOCK_START)
        decoder = Recorder(ToyCausalLM(), clock)
        rec = record(function(ns, "serve_request"), (decoder, ids(tokens), max_new),
                     {"arrival_time": arrival, "clock": clock, "eos_token_id": eos})
        out = rec["result"]
        if isinstance(out, dict) and "__raised__" not in out:
            rec["result"] = {k: (float(v) if isinstance(v, torch.Tensor) and v.dim() == 0 else v)
                             for k, v in out.items() if k in SERVE_KEYS}
        rec["events"] = decoder.events
        return rec


# ================================================================= one change at a time: the quality set
# (inputs: _quality_inputs.py)

def _recorded_unchanged(fn, args: tuple, kwargs: dict | None = None) -> dict:
    """record() for plain-data inputs: `unchanged` says whether every argument kept its value."""
    before = copy.deepcopy((args, kwargs or {}))
    rec = record(fn, args, kwargs)
    rec["unchanged"] = (args, kwargs or {}) == before
    return rec


def quality(ns, key: str) -> list:
    """quality_score on each row of QUALITY[key], one record per row."""
    fn = function(ns, "quality_score")
    return [_recorded_unchanged(fn, (copy.deepcopy(completions), _quality_set(name)))
            for name, completions in QUALITY[key]]


def quality_rejects(ns, key: str) -> list:
    fn = function(ns, "quality_score")
    return [record(fn, (copy.deepcopy(completions), _quality_set(name)))
            for _, _, name, completions in QUALITY_BAD[key]]


def _regressed_record(rec: dict) -> dict:
    rec["kind"] = type(rec["result"]).__name__
    return rec


def regress(ns, key: str) -> list:
    """regressed(baseline, candidate, tolerance=...) on each row of REGRESS[key], one record per row;
    `kind` is the result's type name."""
    fn = function(ns, "regressed")
    return [_regressed_record(_recorded_unchanged(fn, (baseline, candidate), {"tolerance": tolerance}))
            for baseline, candidate, tolerance in copy.deepcopy(REGRESS[key])]


def regress_rejects(ns, key: str) -> list:
    fn = function(ns, "regressed")
    return [record(fn, copy.deepcopy((baseline, candidate)), {"tolerance": tolerance})
            for _, _, baseline, candidate, tolerance in REGRESS_BAD[key]]
