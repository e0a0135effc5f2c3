"""Graders for lab04 (prefill and decode).

The loops run on two kinds of model: the deterministic toys of
autograder/toy_models.py (exact integer logits, so a wrong loop cannot pass by
luck, and a `Recorder` that logs how many tokens each call was fed and charges
FakeClock time per call), and the shipped tiny model. Probes return token lists,
call logs and floats; judges recompute every expectation with
autograder/reference/lab04.py.

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

changed_positions(model, input_ids, other_ids, atol=1e-5)
  | clause                                             | case(s)                                            |
  | every position whose logits row differs            | tiny_model_change_middle_token, change_last_token  |
  | compares logits, not the argmax                    | non_causal_model_changes_everywhere                |
  | `> atol` is strict, and atol is honoured           | atol_is_a_strict_bound                             |
  | [] when nothing changes (atol=0.0 is valid)        | identical_inputs_change_nothing                    |
  | ValueError naming `other_ids` on a shape mismatch  | rejects_mismatched_shapes                          |
  | ValueError naming input_ids / other_ids (not (1, T)| rejects_bad_ids_and_atol                           |
  |   long) and atol (negative, NaN, inf)              |                                                    |
  | inputs not modified; list of Python ints           | every value case                                   |
generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None)
  | greedy argmax of the last position                 | toy_model_8_tokens, tiny_model_greedy              |
  | one call per token, fed the whole sequence         | feeds_whole_sequence_each_call, one_new_token      |
  | EOS included, then stop                            | stops_at_eos                                       |
  | ValueError naming `max_new_tokens` (0, True, 2.5)  | rejects_bad_max_new_tokens                         |
  |   and its value, before any model call             |                                                    |
  | a one-token prompt is valid                        | one_new_token                                      |
  | the same for input_ids (1-D, float, empty, a batch,| rejects_bad_prompt_and_eos                         |
  |   a list) and                                      |                                                    |
  |   eos_token_id (-1, True)                          |                                                    |
generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None)
  | same tokens as generate_uncached (and on reuse)    | matches_uncached_on_toy, tiny_model_same_tokens_.. |
  | one prefill (whole prompt), one-token decodes      | one_prefill_then_single_token_decodes              |
  | no decode after the last token                     | no_decode_after_last_token                         |
  | EOS included, then stop                            | stops_at_eos, tiny_model_tool_call_ends_on_eos     |
  | on_token before the next decode                    | streams_each_token_before_next_step                |
  | ValueError naming `max_new_tokens`, no model call  | rejects_bad_max_new_tokens                         |
  | ... input_ids and eos_token_id, no model call      | rejects_bad_prompt_and_eos                         |
latency_metrics(arrival_time, token_times)
  | ttft, tpot = span / (n - 1), e2e                   | five_evenly_spaced_tokens, uneven_gaps             |
  | arrival not at 0; a tuple of times is accepted     | uneven_gaps                                        |
  | tpot None for one token                            | one_token_has_no_tpot                              |
  | equal consecutive times allowed; first == arrival  | equal_timestamps_allowed                           |
  | rejects: empty / going back (at any index) /       | rejects_empty_token_times, rejects_time_going_back,|
  |   before arrival /                                 |                                                    |
  |   negative arrival / NaN, +-inf or a bool, anywhere| rejects_token_before_arrival, rejects_negative_..,|
  |                                                    | rejects_nan_timestamp                              |
serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None)
  | token times read on `clock` (which starts at 10)   | token_times_on_the_clock                           |
  | ttft from arrival_time (queue included), e2e       | ttft_includes_queue                                |
  | tpot per decode step; None for one token           | tpot_per_decode_step, single_token_request         |
  | EOS ends the request                               | eos_request                                        |
  | ValueError naming `arrival_time` (later than       | rejects_arrival_in_the_future                      |
  |   clock()), before any model call                  |                                                    |
"""
from __future__ import annotations

from functools import lru_cache

import torch

import course

from ..checks import (Input, call_probe, record, reference_rejects, rejects, result_of, shipped_model,
                      single_threaded, unchanged)
from ..core import Case, Fail, Test, function
from ..reference import lab04 as ref
from ..toy_models import TOY_EOS, TOY_EOS_PROMPT, TOY_PROMPT, Recorder, ToyBidirectionalLM, ToyCausalLM, ids

LAB = "lab04"

API = {
    "changed_positions": "(model, input_ids, other_ids, atol=1e-05)",
    "generate_uncached": "(model, input_ids, max_new_tokens, eos_token_id=None)",
    "generate_cached": "(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None)",
    "latency_metrics": "(arrival_time, token_times)",
    "serve_request": "(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None)",
}


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
    """(forward, decoder, prompt ids) of the shipped tiny model on the CPU, loaded once.

    forward is the transformers model itself, decoder the course's CourseDecoder
    with the same weights: a cached loop on the one must give the tokens of an
    uncached loop on the other.
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

_TOY_B = list(TOY_PROMPT)
_TOY_B[2] = 8          # change position 2 of 6: the toy's rows then differ by 0, 0, 12, 12, 9, 11
STRICT_ATOL = 11.0     # exactly the change at the last position: `>` leaves it out, `>=` keeps it
CLOCK_START = 10.0     # the server's clock does not start at 0
_QUEUE = CLOCK_START - 2.25   # the request waited 2.25 s before the server picked it up


def _changed_tiny_inputs(where):
    a = shipped_prompt()
    position = len(a) // 2 if where == "middle" else len(a) - 1
    b = list(a)
    b[position] = (b[position] + 1) % 50  # a different, ordinary token
    return a, b


# ================================================================= probes and judges

def _token_list(got, what="the result"):
    if not isinstance(got, list) or not all(type(t) is int for t in got):
        raise Fail(f"{what} should be a list of Python ints (token ids)", expected="list[int]",
                   got=got, hint="Collect `int(token)` for each new token in a plain list.")
    return got


def _close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and b is not None \
        and abs(a - b) <= 1e-9 + 1e-9 * abs(b)


def _no_calls(rec, call, param):
    if rec.get("events"):
        raise Fail(f"{call} called the model before rejecting `{param}`", expected=[], got=rec["events"],
                   hint="Validate every argument first, before any prefill, decode or forward call.")


# ---------------------------------------------------------------- changed_positions

def _probe_changed(make_model, a_tokens, b_tokens, atol=1e-5):
    def probe(ns):
        return record(function(ns, "changed_positions"), (make_model(), ids(a_tokens), ids(b_tokens), atol))
    return probe


def _judge_changed(make_model, a_tokens, b_tokens, hint, atol=1e-5):
    def judge(rec):
        call = f"changed_positions(model, <{len(a_tokens)} ids>, <{len(b_tokens)} ids>, atol={atol!r})"
        got = _token_list(result_of(rec, call), "changed_positions")
        expected = ref.changed_positions(make_model(), ids(a_tokens), ids(b_tokens), atol)
        if got != expected:
            raise Fail("reported the wrong positions", expected=expected, got=got, hint=hint)
        unchanged(rec, call, allow_same_object=True)
    return judge


def _changed_tiny(where, hint):
    def probe(ns):
        a, b = _changed_tiny_inputs(where)
        return _probe_changed(shipped_forward, a, b)(ns)

    def judge(rec):
        a, b = _changed_tiny_inputs(where)
        _judge_changed(shipped_forward, a, b, hint)(rec)
    return probe, judge


_BAD_SHAPE = Input("ids of 4 and of 3 tokens", lambda: (ToyCausalLM(), ids([1, 2, 3, 4]), ids([1, 2, 3]), 1e-5))


BAD_CHANGED = [
    ("input_ids", Input("1-D input_ids", lambda: (ToyCausalLM(), torch.tensor([1, 2, 3]), ids([1, 2, 3]), 1e-5))),
    ("other_ids", Input("float other_ids", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 3]).float(), 1e-5))),
    ("atol", Input("atol=-1.0", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), -1.0))),
    ("atol", Input("atol=nan", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), float("nan")))),
    ("atol", Input("atol=inf", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), float("inf")))),
    ("atol", Input("atol=True", lambda: (ToyCausalLM(), ids([1, 2, 3]), ids([1, 2, 4]), True))),
]


def _judge_bad_changed(recs):
    for (param, inp), rec in zip(BAD_CHANGED, recs):
        call = f"changed_positions(model, ...) with {inp.label}"
        reference_rejects(ref.changed_positions, inp.args(), {}, call)
        rejects(rec, call, param, None, "Validate both id tensors ((1, T) long) and atol (finite, >= 0) before "
                                        "calling the model; name the parameter in the ValueError.", show_value=False)


def _judge_bad_shape(recs):
    reference_rejects(ref.changed_positions, _BAD_SHAPE.args(), {}, "changed_positions(model, (1, 4), (1, 3))")
    rejects(recs[0], "changed_positions(model, (1, 4) ids, (1, 3) ids)", "other_ids", ids([1, 2, 3]),
            "Compare the shapes first: raise ValueError naming `other_ids` and showing its shape.")


CHANGED = Test(LAB, "changed_positions_shows_causality",
               "changed_positions reports exactly the positions whose logits differ", (
    Case("tiny_model_change_middle_token", 1,
         *_changed_tiny("middle", "Run the model on both sequences and compare row t of the logits for every "
                                  "position t: max |a - b| > atol means t changed."),
         visible=True),
    Case("change_last_token", 1,
         *_changed_tiny("last", "Only the last position can see the last token; include position T-1.")),
    Case("identical_inputs_change_nothing", 1, _probe_changed(ToyCausalLM, TOY_PROMPT, TOY_PROMPT, 0.0),
         _judge_changed(ToyCausalLM, TOY_PROMPT, TOY_PROMPT, "Equal inputs give equal logits: return [] "
                                                             "(atol=0.0 is allowed: exact comparison).", 0.0)),
    Case("non_causal_model_changes_everywhere", 1, _probe_changed(ToyBidirectionalLM, TOY_PROMPT, _TOY_B),
         _judge_changed(ToyBidirectionalLM, TOY_PROMPT, _TOY_B,
                        "Compare the logits themselves, not the argmax: here every position's logits move a "
                        "little while the best token at early positions stays the same.")),
    Case("atol_is_a_strict_bound", 1, _probe_changed(ToyCausalLM, TOY_PROMPT, _TOY_B, STRICT_ATOL),
         _judge_changed(ToyCausalLM, TOY_PROMPT, _TOY_B,
                        f"A row changed when its largest difference is MORE than atol: here one row differs by "
                        f"exactly atol={STRICT_ATOL} and must be left out. Use the atol you are given.",
                        STRICT_ATOL)),
    Case("rejects_mismatched_shapes", 1, call_probe("changed_positions", [_BAD_SHAPE]), _judge_bad_shape),
    Case("rejects_bad_ids_and_atol", 1, call_probe("changed_positions", [i for _, i in BAD_CHANGED]),
         _judge_bad_changed),
))


# ---------------------------------------------------------------- generate_uncached

def _probe_uncached(tokens, max_new, eos=None, *, shipped=False):
    def probe(ns):
        model = Recorder(shipped_forward() if shipped else ToyCausalLM())
        rec = record(function(ns, "generate_uncached"),
                     (model, ids(shipped_prompt() if shipped else tokens), max_new, eos))
        rec["events"] = model.events
        return rec
    return probe


def _expected_uncached(tokens, max_new, eos, shipped):
    model = Recorder(shipped_forward() if shipped else ToyCausalLM())
    prompt = ids(shipped_prompt() if shipped else tokens)
    return ref.generate_uncached(model, prompt, max_new, eos), model.events


def _judge_uncached_tokens(tokens, max_new, eos=None, *, shipped=False, hint):
    def judge(rec):
        call = f"generate_uncached(model, prompt, {max_new}, {eos})"
        got = _token_list(result_of(rec, call), "generate_uncached")
        expected, _ = _expected_uncached(tokens, max_new, eos, shipped)
        if got != expected:
            raise Fail("generated different tokens", expected=expected, got=got, hint=hint)
        unchanged(rec, call)
    return judge


def _judge_uncached_calls(tokens, max_new, eos=None):
    def judge(rec):
        result_of(rec, f"generate_uncached(model, prompt, {max_new}, {eos})")
        expected_tokens, expected = _expected_uncached(tokens, max_new, eos, False)
        got = rec["events"]
        if got == expected:
            return
        if len(got) > len(expected_tokens):
            hint = "Stop as soon as you have max_new_tokens tokens: that many model calls, no extra one."
        elif any(kind != "forward" for kind, _ in got):
            hint = "Call model(ids) itself; this loop has no prefill or decode."
        else:
            hint = "Feed the WHOLE sequence each call: ids = prompt + every token generated so far."
        raise Fail("called the model with the wrong inputs: each call must be fed the WHOLE sequence so far "
                   "(prompt + every token generated), once per new token", expected=expected, got=got, hint=hint)
    return judge


def _probe_bad_max_new(fn_name, *values):
    def probe(ns):
        out = []
        for max_new in values:
            model = Recorder(ToyCausalLM())
            rec = record(function(ns, fn_name), (model, ids(TOY_PROMPT), max_new, None))
            rec["events"] = model.events
            out.append(rec)
        return out
    return probe


def _judge_bad_max_new(fn_name, *values):
    def judge(recs):
        for max_new, rec in zip(values, recs):
            call = f"{fn_name}(model, prompt, {max_new!r})"
            reference_rejects(getattr(ref, fn_name), (ToyCausalLM(), ids(TOY_PROMPT), max_new, None), {}, call)
            rejects(rec, call, "max_new_tokens", max_new)
            _no_calls(rec, call, "max_new_tokens")
    return judge


BAD_GENERATION = [   # (param, shown value, input_ids, eos_token_id)
    ("input_ids", "a 1-D prompt", lambda: torch.tensor(TOY_PROMPT), None),
    ("input_ids", "a float prompt", lambda: ids(TOY_PROMPT).float(), None),
    ("input_ids", "an empty (1, 0) prompt", lambda: torch.zeros(1, 0, dtype=torch.long), None),
    ("input_ids", "a (2, T) batch", lambda: torch.cat([ids(TOY_PROMPT), ids(TOY_PROMPT)]), None),
    ("input_ids", "a list of ids", lambda: [list(TOY_PROMPT)], None),
    ("eos_token_id", "eos_token_id=-1", lambda: ids(TOY_PROMPT), -1),
    ("eos_token_id", "eos_token_id=True", lambda: ids(TOY_PROMPT), True),
]


def _probe_bad_generation(fn_name):
    def probe(ns):
        fn, out = function(ns, fn_name), []
        for _, _, make, eos in BAD_GENERATION:
            model = Recorder(ToyCausalLM())
            rec = record(fn, (model, make(), 4, eos))
            rec["events"] = model.events
            out.append(rec)
        return out
    return probe


def _judge_bad_generation(fn_name):
    def judge(recs):
        for (param, label, make, eos), rec in zip(BAD_GENERATION, recs):
            call = f"{fn_name}(model, ...) with {label}"
            reference_rejects(getattr(ref, fn_name), (ToyCausalLM(), make(), 4, eos), {}, call)
            rejects(rec, call, param, make() if param == "input_ids" else eos,
                    f"Validate `{param}` before any model call and raise ValueError naming it and showing the "
                    "value (for a tensor, its shape or dtype).")
            _no_calls(rec, call, param)
    return judge


UNCACHED = Test(LAB, "generate_uncached_recomputes",
                "generate_uncached: greedy tokens, one full forward per new token", (
    Case("toy_model_8_tokens", 1, _probe_uncached(TOY_PROMPT, 8),
         _judge_uncached_tokens(TOY_PROMPT, 8, hint="Take argmax of the logits at the LAST position, "
                                                   "logits[0, -1], append it, and call the model again."),
         visible=True),
    Case("feeds_whole_sequence_each_call", 1, _probe_uncached(TOY_PROMPT, 5), _judge_uncached_calls(TOY_PROMPT, 5),
         visible=True),
    Case("one_new_token", 1, _probe_uncached(TOY_PROMPT[:1], 1), _judge_uncached_calls(TOY_PROMPT[:1], 1)),
    Case("stops_at_eos", 1, _probe_uncached(TOY_EOS_PROMPT, 12, TOY_EOS),
         _judge_uncached_tokens(TOY_EOS_PROMPT, 12, TOY_EOS,
                                hint="Append the EOS token to the output, then stop; do not generate past it.")),
    Case("tiny_model_greedy", 1, _probe_uncached(None, 10, shipped=True),
         _judge_uncached_tokens(None, 10, shipped=True,
                                hint="The model returns logits (1, T, V); the next token comes from row -1.")),
    Case("rejects_bad_max_new_tokens", 1, _probe_bad_max_new("generate_uncached", 0, True, 2.5),
         _judge_bad_max_new("generate_uncached", 0, True, 2.5)),
    Case("rejects_bad_prompt_and_eos", 1, _probe_bad_generation("generate_uncached"),
         _judge_bad_generation("generate_uncached")),
))


# ---------------------------------------------------------------- generate_cached

def _probe_cached(tokens, max_new, eos=None, *, stream=False, twice=False):
    def probe(ns):
        fn = function(ns, "generate_cached")
        decoder = Recorder(ToyCausalLM())
        kwargs = {"on_token": lambda t: decoder.events.append(["token", t])} if stream else {}
        rec = record(fn, (decoder, ids(tokens), max_new, eos), kwargs)
        rec["events"] = decoder.events
        if twice:  # the same decoder again: nothing may carry over from the first request
            rec["again"] = record(fn, (decoder, ids(tokens), max_new, eos))["result"]
        return rec
    return probe


def _expected_cached(tokens, max_new, eos=None, *, stream=False):
    decoder = Recorder(ToyCausalLM())
    on_token = (lambda t: decoder.events.append(["token", t])) if stream else None
    out = ref.generate_cached(decoder, ids(tokens), max_new, eos, on_token=on_token)
    return out, decoder.events


def _judge_cached_tokens(tokens, max_new, eos=None, *, hint):
    def judge(rec):
        call = f"generate_cached(decoder, prompt, {max_new}, {eos})"
        got = _token_list(result_of(rec, call), "generate_cached")
        # The expected tokens are those of the recompute-everything loop: a cache must not change them.
        expected = ref.generate_uncached(ToyCausalLM(), ids(tokens), max_new, eos)
        if got != expected:
            raise Fail("generated different tokens from the uncached loop", expected=expected, got=got, hint=hint)
        unchanged(rec, call)
        if "again" in rec and rec["again"] != expected:
            raise Fail("a second request on the same decoder gave different tokens", expected=expected,
                       got=rec["again"], hint="Keep no state between calls: each request starts with its own "
                                              "prefill and its own kv.")
    return judge


def _judge_cached_calls(tokens, max_new, eos=None, *, hint, stream=False):
    def judge(rec):
        result_of(rec, f"generate_cached(decoder, prompt, {max_new}, {eos})")
        _, expected = _expected_cached(tokens, max_new, eos, stream=stream)
        if rec["events"] != expected:
            raise Fail("the calls to the decoder (kind, tokens fed) are not prefill-once-then-one-token-decodes",
                       expected=expected, got=rec["events"], hint=hint)
    return judge


def _probe_cached_tiny(max_new, with_eos):
    def probe(ns):
        decoder = Recorder(shipped_decoder())
        rec = record(function(ns, "generate_cached"),
                     (decoder, ids(shipped_prompt()), max_new, shipped_eos() if with_eos else None))
        rec["events"] = decoder.events
        return rec
    return probe


def _judge_cached_tiny(max_new, with_eos):
    def judge(rec):
        got = _token_list(result_of(rec, f"generate_cached(tiny decoder, prompt, {max_new})"), "generate_cached")
        eos = shipped_eos() if with_eos else None
        # expected: the recompute-everything loop on the transformers model with the same weights
        expected = ref.generate_uncached(shipped_forward(), ids(shipped_prompt()), max_new, eos)
        if got != expected:
            raise Fail("on the tiny model, the cached loop's tokens differ from the uncached loop's",
                       expected=expected, got=got,
                       hint="Prefill the prompt once, then feed decode() only the newest token together with the "
                            "kv it returned last time; stop right after EOS.")
        n_decodes = sum(1 for kind, _ in rec["events"] if kind == "decode")
        if n_decodes != len(expected) - 1:
            raise Fail(f"made {n_decodes} decode calls for {len(expected)} tokens",
                       expected=len(expected) - 1, got=n_decodes,
                       hint="Prefill gives the first token; each further token needs exactly one decode call.")
    return judge


_REFEED_HINT = ("Call prefill once with the whole prompt; after that call decode with ONLY the newest "
                "token, shape (1, 1), and the kv returned by the previous call.")

CACHED = Test(LAB, "generate_cached_prefills_once",
              "generate_cached: one prefill, then one new token per decode step; same tokens as without cache", (
    Case("matches_uncached_on_toy", 1, _probe_cached(TOY_PROMPT, 8, twice=True),
         _judge_cached_tokens(TOY_PROMPT, 8, hint="Use the logits of the last position each step, and the kv "
                                                  "the previous call returned (decode gives you a new one)."),
         visible=True),
    Case("one_prefill_then_single_token_decodes", 2, _probe_cached(TOY_PROMPT, 6),
         _judge_cached_calls(TOY_PROMPT, 6, hint=_REFEED_HINT), visible=True),
    Case("no_decode_after_last_token", 1, _probe_cached(TOY_PROMPT, 1),
         _judge_cached_calls(TOY_PROMPT, 1, hint="Prefill already gives the first token; with max_new_tokens=1 "
                                                 "no decode call is needed. Stop before decoding a token you "
                                                 "will never use.")),
    Case("stops_at_eos", 1, _probe_cached(TOY_EOS_PROMPT, 12, TOY_EOS),
         _judge_cached_calls(TOY_EOS_PROMPT, 12, TOY_EOS,
                             hint="Append EOS to the output and stop at once: no decode call after it.")),
    Case("streams_each_token_before_next_step", 1, _probe_cached(TOY_PROMPT, 4, stream=True),
         _judge_cached_calls(TOY_PROMPT, 4, stream=True,
                             hint="Call on_token(token) as soon as a token is chosen, before the decode "
                                  "call that computes the next one.")),
    Case("tiny_model_same_tokens_as_uncached", 2, _probe_cached_tiny(16, False), _judge_cached_tiny(16, False)),
    Case("tiny_model_tool_call_ends_on_eos", 1, _probe_cached_tiny(48, True), _judge_cached_tiny(48, True)),
    Case("rejects_bad_max_new_tokens", 1, _probe_bad_max_new("generate_cached", -1, True, 2.5),
         _judge_bad_max_new("generate_cached", -1, True, 2.5)),
    Case("rejects_bad_prompt_and_eos", 1, _probe_bad_generation("generate_cached"),
         _judge_bad_generation("generate_cached")),
))


# ---------------------------------------------------------------- latency_metrics

METRIC_KEYS = ("ttft", "tpot", "e2e")


def _metrics_input(arrival, times):
    return Input(f"arrival {arrival!r}, times {times!r}", lambda: (arrival, list(times) if isinstance(times, list)
                                                                   else times))


def _probe_metrics(*inputs):
    base = call_probe("latency_metrics", list(inputs))

    def probe(ns):
        recs = base(ns)
        for rec in recs:  # keep only the contract keys; floats may come as 0-d tensors
            out = rec["result"]
            if isinstance(out, dict) and "__raised__" not in out:
                rec["result"] = {k: (float(v) if isinstance(v, torch.Tensor) and v.dim() == 0 else v)
                                 for k, v in out.items() if k in METRIC_KEYS}
        return recs
    return probe


def _judge_metrics(hint, *calls):
    def judge(recs):
        for (arrival, times), rec in zip(calls, recs):
            call = f"latency_metrics({arrival!r}, {times!r})"
            got = result_of(rec, call)
            expected = ref.latency_metrics(arrival, times)
            if not isinstance(got, dict) or set(got) != set(METRIC_KEYS):
                raise Fail(f"{call} should return a dict with keys 'ttft', 'tpot', 'e2e'", expected=sorted(expected),
                           got=got if not isinstance(got, dict) else sorted(got))
            for key in METRIC_KEYS:
                e, g = expected[key], got[key]
                if e is None:
                    if g is not None:
                        raise Fail(f"`{key}` of a one-token request should be None (no gap between tokens)",
                                   expected=None, got=g, hint="With one token there are zero gaps to average; "
                                                             "the contract says return None.")
                elif not _close(g, e):
                    raise Fail(f"`{key}` of {call} is wrong", expected=e, got=g, hint=hint)
    return judge


def _metrics_case(name, hint, *calls, visible=False):
    return Case(name, 1, _probe_metrics(*(_metrics_input(a, t) for a, t in calls)), _judge_metrics(hint, *calls),
                visible=visible)


def _metrics_rejects(name, param, *calls):
    """Each (arrival, times, shown) must raise ValueError naming `param` and showing `shown`."""
    def judge(recs):
        for (arrival, times, shown), rec in zip(calls, recs):
            call = f"latency_metrics({arrival!r}, {times!r})"
            reference_rejects(ref.latency_metrics, (arrival, times), {}, call)
            rejects(rec, call, param, shown)
    return Case(name, 1, _probe_metrics(*(_metrics_input(a, t) for a, t, _ in calls)), judge)


_TPOT_HINT = ("n tokens have n - 1 gaps between them: TPOT = (last - first) / (n - 1). "
              "TTFT = first token time - arrival time.")
INF = float("inf")
NAN = float("nan")

METRICS = Test(LAB, "latency_metrics_ttft_tpot", "latency_metrics: TTFT, TPOT and end-to-end latency", (
    _metrics_case("five_evenly_spaced_tokens", _TPOT_HINT, (1.0, [1.5, 1.75, 2.0, 2.25, 2.5]), visible=True),
    _metrics_case("uneven_gaps", _TPOT_HINT, (0.0, [0.8, 0.9, 1.4, 1.45]), (7.5, (8.0, 8.125, 9.0))),
    _metrics_case("one_token_has_no_tpot", _TPOT_HINT, (2.0, [2.5])),
    _metrics_case("equal_timestamps_allowed", "Non-decreasing means equal times are allowed (a first token at "
                  "the arrival time too): reject only a time that goes BACK.", (3.0, [3.5, 3.5, 3.5]),
                  (4.0, [4.0, 4.25])),
    _metrics_rejects("rejects_empty_token_times", "token_times", (0.0, [], [])),
    _metrics_rejects("rejects_time_going_back", "token_times", (0.0, [0.5, 0.75, 0.625], 0.625),
                     (0.0, [0.75, 0.5], 0.5)),
    _metrics_rejects("rejects_negative_arrival", "arrival_time", (-1.5, [0.5], -1.5)),
    _metrics_rejects("rejects_token_before_arrival", "token_times", (2.0, [1.75, 2.5], 1.75)),
    _metrics_rejects("rejects_nan_timestamp", "token_times", (0.0, [0.5, NAN], NAN), (0.0, [0.5, INF], INF),
                     (0.0, [-INF, 0.5], -INF), (0.0, [0.5, True], True)),
))


# ---------------------------------------------------------------- serve_request

SERVE_KEYS = ("tokens", "token_times", "ttft", "tpot", "e2e")


def _probe_serve(tokens, max_new, arrival, eos=None):
    def probe(ns):
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
    return probe


def _expected_serve(tokens, max_new, arrival, eos=None):
    clock = course.FakeClock(CLOCK_START)
    return ref.serve_request(Recorder(ToyCausalLM(), clock), ids(tokens), max_new,
                             arrival_time=arrival, clock=clock, eos_token_id=eos)


def _judge_serve(tokens, max_new, arrival, eos, keys, hint):
    def judge(rec):
        got = result_of(rec, f"serve_request(decoder, prompt, {max_new}, arrival_time={arrival!r}, clock)")
        expected = _expected_serve(tokens, max_new, arrival, eos)
        if not isinstance(got, dict):
            raise Fail("should return a dict", expected=sorted(expected), got=got)
        missing = [k for k in keys if k not in got]
        if missing:
            raise Fail(f"the result has no key(s) {missing}", expected=sorted(expected), got=sorted(got))
        for key in keys:
            e, g = expected[key], got[key]
            if key == "tokens":
                ok = g == e
            elif key == "token_times":
                ok = isinstance(g, list) and len(g) == len(e) and all(_close(x, y) for x, y in zip(g, e))
            elif e is None:
                ok = g is None
            else:
                ok = _close(g, e)
            if not ok:
                raise Fail(f"`{key}` is wrong", expected=e, got=g, hint=hint)
    return judge


def _judge_serve_future(rec):
    call = f"serve_request(..., arrival_time={CLOCK_START + 2.5!r}, clock) with clock() = {CLOCK_START!r}"
    clock = course.FakeClock(CLOCK_START)
    reference_rejects(ref.serve_request, (Recorder(ToyCausalLM(), clock), ids(TOY_PROMPT), 3),
                      {"arrival_time": CLOCK_START + 2.5, "clock": clock}, call)
    rejects(rec, call, "arrival_time", CLOCK_START + 2.5,
            "Read clock() once at the start; an arrival_time later than that is impossible: raise ValueError "
            "naming `arrival_time` and showing it.")
    _no_calls(rec, call, "arrival_time")


_TIMES_HINT = ("Read clock() once right after each token is chosen (after prefill for the first, after each "
               "decode for the rest), e.g. in the on_token callback of generate_cached.")

SERVE = Test(LAB, "serve_request_measures_from_arrival",
             "serve_request: token times on the clock, TTFT from arrival (queue included), TPOT per step", (
    Case("token_times_on_the_clock", 1, _probe_serve(TOY_PROMPT, 5, _QUEUE),
         _judge_serve(TOY_PROMPT, 5, _QUEUE, None, ("tokens", "token_times"), _TIMES_HINT), visible=True),
    Case("ttft_includes_queue", 2, _probe_serve(TOY_PROMPT, 5, _QUEUE),
         _judge_serve(TOY_PROMPT, 5, _QUEUE, None, ("ttft", "e2e"),
                      "TTFT is measured from `arrival_time`, not from when your loop started: the time the "
                      "request waited in the queue is part of what the user waits."), visible=True),
    Case("tpot_per_decode_step", 1, _probe_serve(TOY_PROMPT, 7, CLOCK_START),
         _judge_serve(TOY_PROMPT, 7, CLOCK_START, None, ("tpot",), _TPOT_HINT)),
    Case("eos_request", 1, _probe_serve(TOY_EOS_PROMPT, 12, _QUEUE, TOY_EOS),
         _judge_serve(TOY_EOS_PROMPT, 12, _QUEUE, TOY_EOS, ("tokens", "token_times", "ttft", "tpot"), _TPOT_HINT)),
    Case("single_token_request", 1, _probe_serve(TOY_PROMPT, 1, _QUEUE),
         _judge_serve(TOY_PROMPT, 1, _QUEUE, None, ("tokens", "token_times", "ttft", "tpot"),
                      "One token: TTFT as usual, TPOT None.")),
    Case("rejects_arrival_in_the_future", 1, _probe_serve(TOY_PROMPT, 3, CLOCK_START + 2.5), _judge_serve_future),
))


# ================================================================= the tests

TESTS = [single_threaded(t) for t in (CHANGED, UNCACHED, CACHED, METRICS, SERVE)]
