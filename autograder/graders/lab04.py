"""Graders for lab04 (prefill and decode).

Graded API (the docstrings of the stubs in solutions/lab04):
  * changed_positions(model, input_ids, other_ids, atol=1e-5) -> list[int]
  * generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None) -> list[int]
  * generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None) -> list[int]
  * latency_metrics(arrival_time, token_times) -> {"ttft", "tpot", "e2e"}
  * serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None) -> dict

The loops run on two kinds of model: small deterministic toys defined here (exact
integer logits, so a wrong loop cannot pass by luck, and a `Recorder` that logs
how many tokens each call was fed and charges FakeClock time per call), and the
shipped tiny model. Probes return token lists, call logs and floats; judges
recompute every expectation with autograder/reference/lab04.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from functools import lru_cache, wraps

import torch

import course

from ..core import Case, Fail, Test, function, is_raised, raised
from ..reference import lab04 as ref

LAB = "lab04"

# ---------------------------------------------------------------- toy models
#
# ToyCausalLM: the logits at position t depend only on tokens 0..t, through a
# running integer hash. Each row is a permutation of 0..12, so the argmax is
# unique and the runner-up is a full 1.0 behind: no ties, no float noise.

TOY_VOCAB = 13
TOY_EOS = 0
_H0 = 12345
_MOD = 2_147_483_647


def _toy_step(h: int, token: int) -> int:
    return (h * 1_000_003 + token * 7919 + 17) % _MOD


def _toy_row(h: int) -> list[float]:
    a, b = 1 + h % (TOY_VOCAB - 1), (h // (TOY_VOCAB - 1)) % TOY_VOCAB
    return [float((a * v + b) % TOY_VOCAB) for v in range(TOY_VOCAB)]


def _check_ids(ids, what):
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        got = (tuple(ids.shape), ids.dtype) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"`{what}` must be a 2-D torch.long tensor (batch, tokens), got {got}.")
    if ids.shape[1] < 1:
        raise ValueError(f"`{what}` must hold at least one token, got shape {tuple(ids.shape)}.")
    if int(ids.min()) < 0 or int(ids.max()) >= TOY_VOCAB:
        raise ValueError(f"`{what}` must hold ids in [0, {TOY_VOCAB - 1}], got {ids.tolist()}.")


class ToyCache:
    """What a toy decoder remembers about the tokens it has seen: one hash per row."""

    def __init__(self, hashes, length):
        self.hashes = tuple(hashes)
        self.length = length

    def __repr__(self):
        return f"ToyCache(length={self.length})"


class ToyCausalLM:
    """A deterministic causal LM with both call shapes of the course decoder.

        model(input_ids)               (B, T) -> logits (B, T, V)
        model.prefill(input_ids)       (B, T) -> (logits (B, T, V), cache)
        model.decode(token_ids, cache) (B, k) -> (logits (B, k, V), a NEW cache)

    decode never changes the cache it is given, so a loop that keeps using the
    prefill cache instead of the returned one goes wrong.
    """

    vocab_size = TOY_VOCAB
    eos_token_id = TOY_EOS

    def _run(self, ids, hashes):
        rows, out_h = [], []
        for b in range(ids.shape[0]):
            h, row = hashes[b], []
            for token in ids[b].tolist():
                h = _toy_step(h, token)
                row.append(_toy_row(h))
            rows.append(row)
            out_h.append(h)
        return torch.tensor(rows, dtype=torch.float32), out_h  # (B, T, V)

    def __call__(self, input_ids):
        _check_ids(input_ids, "input_ids")
        return self._run(input_ids, [_H0] * input_ids.shape[0])[0]

    def prefill(self, input_ids):
        _check_ids(input_ids, "input_ids")
        logits, hashes = self._run(input_ids, [_H0] * input_ids.shape[0])
        return logits, ToyCache(hashes, input_ids.shape[1])

    def decode(self, token_ids, cache):
        _check_ids(token_ids, "token_ids")
        if not isinstance(cache, ToyCache) or len(cache.hashes) != token_ids.shape[0]:
            raise ValueError(f"`kv` must be the cache returned by prefill/decode for this batch, got {cache!r}.")
        logits, hashes = self._run(token_ids, list(cache.hashes))
        return logits, ToyCache(hashes, cache.length + token_ids.shape[1])


class ToyBidirectionalLM(ToyCausalLM):
    """NOT causal: every position also sees a summary of the whole sequence.

    The extra term is below 0.4 while rows differ by 1.0, so the argmax at an
    early position never changes, but its logits do (like an encoder's).
    """

    def __call__(self, input_ids):
        logits = super().__call__(input_ids)                 # (B, T, V)
        total = input_ids.sum(dim=1) % 37                    # (B,)
        ramp = torch.arange(1, TOY_VOCAB + 1, dtype=torch.float32) / TOY_VOCAB   # (V,)
        return logits + 0.01 * total.float()[:, None, None] * ramp[None, None, :]


class Recorder:
    """Wrap a model or decoder; log each call as [kind, tokens fed] and, given a
    FakeClock, charge simulated time for it:

        forward / prefill of T tokens   PREFILL_FIXED + PREFILL_PER_TOKEN * T seconds
        decode of k tokens              DECODE_PER_TOKEN * k seconds
    """

    PREFILL_FIXED = 0.25
    PREFILL_PER_TOKEN = 0.0625
    DECODE_PER_TOKEN = 0.03125

    def __init__(self, inner, clock=None):
        self.inner = inner
        self.clock = clock
        self.events: list[list] = []

    def _charge(self, seconds):
        if self.clock is not None:
            self.clock.advance(seconds)

    def __call__(self, input_ids):
        out = self.inner(input_ids)
        self.events.append(["forward", int(input_ids.shape[1])])
        self._charge(self.PREFILL_FIXED + self.PREFILL_PER_TOKEN * input_ids.shape[1])
        return out

    def prefill(self, input_ids):
        out = self.inner.prefill(input_ids)
        self.events.append(["prefill", int(input_ids.shape[1])])
        self._charge(self.PREFILL_FIXED + self.PREFILL_PER_TOKEN * input_ids.shape[1])
        return out

    def decode(self, token_ids, kv):
        out = self.inner.decode(token_ids, kv)
        self.events.append(["decode", int(token_ids.shape[1])])
        self._charge(self.DECODE_PER_TOKEN * token_ids.shape[1])
        return out


# Prompts for the toys (found once by search; the judges recompute everything).
TOY_PROMPT = [3, 7, 1, 12, 5, 9]          # greedy path: 9 tokens before the first EOS (id 0)
TOY_EOS_PROMPT = [2, 10, 11, 4]           # greedy path reaches EOS as its 7th token


def _ids(tokens):
    return torch.tensor([list(tokens)], dtype=torch.long)  # (1, T)


# ---------------------------------------------------------------- the shipped model

@contextlib.contextmanager
def _one_thread():
    """Run the tiny model on one CPU thread, and restore the caller's setting after.

    A 1M-parameter model gains nothing from a second thread, and on a busy
    2-core machine a descheduled worker thread can stall each call by 100+ ms.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _on_one_thread(fn):
    @wraps(fn)
    def wrapper(*args, **kwargs):
        with _one_thread():
            return fn(*args, **kwargs)
    return wrapper


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
    from course.tiny_model import LAB_PROMPTS, load_tiny_model

    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()          # no "Loading weights" bar in a test cell
    try:
        hf, tokenizer = load_tiny_model("cpu")
    finally:
        if bar:
            hf_logging.enable_progress_bar()
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


# ---------------------------------------------------------------- judging helpers

def _must_raise(obs, param, value=None):
    if not is_raised(obs) or not obs["is_value_error"]:
        raise Fail(f"should raise ValueError for this invalid `{param}`", expected="ValueError", got=obs,
                   hint=f"Validate `{param}` before doing any work and raise ValueError with a message naming it.")
    if f"`{param}`" not in obs["message"] and param not in obs["message"]:
        raise Fail(f"the error message should name the parameter `{param}`",
                   expected=f"a message naming `{param}`", got=obs["message"])
    if value is not None and value not in obs["message"]:
        raise Fail(f"the error message should show the value it got ({value})",
                   expected=f"a message containing {value}", got=obs["message"],
                   hint="Follow the template: \"`name` must be ..., got VALUE.\"")


def _no_raise(obs, what):
    if is_raised(obs):
        raise Fail(f"{what} raised {obs['__raised__']}: {obs['message']}", got=obs)


def _token_list(got, what="the result"):
    if not isinstance(got, list) or not all(type(t) is int for t in got):
        raise Fail(f"{what} should be a list of Python ints (token ids)", expected="list[int]",
                   got=got, hint="Collect `int(token)` for each new token in a plain list.")
    return got


def _close(a, b):
    return a is not None and b is not None and isinstance(a, (int, float)) and not isinstance(a, bool) \
        and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# ================================================================= changed_positions

def _probe_changed(make_model, a_tokens, b_tokens, atol=1e-5):
    def probe(ns):
        fn = function(ns, "changed_positions")
        a, b = _ids(a_tokens), _ids(b_tokens)
        before = (a.clone(), b.clone())
        out = fn(make_model(), a, b, atol)
        return {"result": out, "unchanged": bool(torch.equal(a, before[0]) and torch.equal(b, before[1]))}
    return probe


def _judge_changed(make_model, a_tokens, b_tokens, hint, atol=1e-5):
    def judge(obs):
        got = obs["result"]
        _no_raise(got, "changed_positions")
        expected = ref.changed_positions(make_model(), _ids(a_tokens), _ids(b_tokens), atol)
        got = _token_list(got, "changed_positions")
        if got != expected:
            raise Fail("reported the wrong positions", expected=expected, got=got, hint=hint)
        if not obs["unchanged"]:
            raise Fail("changed an input tensor", hint="Never modify `input_ids` or `other_ids` in place.")
    return judge


def _changed_tiny_inputs(where):
    a = shipped_prompt()
    position = len(a) // 2 if where == "middle" else len(a) - 1
    b = list(a)
    b[position] = (b[position] + 1) % 50  # a different, ordinary token
    return a, b


def _probe_changed_tiny(where):
    def probe(ns):
        a, b = _changed_tiny_inputs(where)
        return _probe_changed(shipped_forward, a, b)(ns)
    return probe


def _judge_changed_tiny(where, hint):
    def judge(obs):
        a, b = _changed_tiny_inputs(where)
        _judge_changed(shipped_forward, a, b, hint)(obs)
    return judge


def _probe_changed_bad_shape(ns):
    fn = function(ns, "changed_positions")
    try:
        return fn(ToyCausalLM(), _ids([1, 2, 3, 4]), _ids([1, 2, 3]), 1e-5)
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


_TOY_B = list(TOY_PROMPT)
_TOY_B[2] = 8   # change position 2 of 6

CHANGED = Test(LAB, "changed_positions_shows_causality",
               "changed_positions reports exactly the positions whose logits differ", (
    Case("tiny_model_change_middle_token", 1, _probe_changed_tiny("middle"),
         _judge_changed_tiny("middle", "Run the model on both sequences and compare row t of the logits for every "
                                "position t: max |a - b| > atol means t changed."),
         visible=True),
    Case("change_last_token", 1, _probe_changed_tiny("last"),
         _judge_changed_tiny("last", "Only the last position can see the last token; include position T-1.")),
    Case("identical_inputs_change_nothing", 1, _probe_changed(ToyCausalLM, TOY_PROMPT, TOY_PROMPT),
         _judge_changed(ToyCausalLM, TOY_PROMPT, TOY_PROMPT, "Equal inputs give equal logits: return [].")),
    Case("non_causal_model_changes_everywhere", 1, _probe_changed(ToyBidirectionalLM, TOY_PROMPT, _TOY_B),
         _judge_changed(ToyBidirectionalLM, TOY_PROMPT, _TOY_B,
                        "Compare the logits themselves, not the argmax: here every position's logits move a "
                        "little while the best token at early positions stays the same.")),
    Case("rejects_mismatched_shapes", 1, _probe_changed_bad_shape,
         lambda obs: _must_raise(obs, "other_ids")),
))


# ================================================================= generate_uncached

def _probe_uncached(tokens, max_new, eos=None, *, shipped=False):
    def probe(ns):
        fn = function(ns, "generate_uncached")
        ids = _ids(shipped_prompt() if shipped else tokens)
        before = ids.clone()
        model = Recorder(shipped_forward() if shipped else ToyCausalLM())
        out = fn(model, ids, max_new, eos)
        return {"tokens": out, "events": model.events, "unchanged": bool(torch.equal(ids, before))}
    return probe


def _expected_uncached(tokens, max_new, eos, shipped):
    model = Recorder(shipped_forward() if shipped else ToyCausalLM())
    prompt = _ids(shipped_prompt() if shipped else tokens)
    return ref.generate_uncached(model, prompt, max_new, eos), model.events


def _judge_uncached_tokens(tokens, max_new, eos=None, *, shipped=False, hint):
    def judge(obs):
        _no_raise(obs["tokens"], "generate_uncached")
        got = _token_list(obs["tokens"], "generate_uncached")
        expected, _ = _expected_uncached(tokens, max_new, eos, shipped)
        if got != expected:
            raise Fail("generated different tokens", expected=expected, got=got, hint=hint)
        if not obs["unchanged"]:
            raise Fail("changed `input_ids` in place", hint="Build the growing sequence with torch.cat.")
    return judge


def _judge_uncached_calls(tokens, max_new, eos=None):
    def judge(obs):
        _no_raise(obs["tokens"], "generate_uncached")
        _, expected = _expected_uncached(tokens, max_new, eos, False)
        if obs["events"] != expected:
            raise Fail("called the model with the wrong inputs: each call must be fed the WHOLE sequence so far "
                       "(prompt + every token generated), once per new token",
                       expected=expected, got=obs["events"],
                       hint="Call model(ids) once per new token, with ids = prompt + generated tokens; "
                            "stop as soon as you have max_new_tokens tokens (no extra call).")
    return judge


def _probe_uncached_bad(max_new):
    def probe(ns):
        fn = function(ns, "generate_uncached")
        try:
            return fn(ToyCausalLM(), _ids(TOY_PROMPT), max_new, None)
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
    return probe


UNCACHED = Test(LAB, "generate_uncached_recomputes",
                "generate_uncached: greedy tokens, one full forward per new token", (
    Case("toy_model_8_tokens", 1, _probe_uncached(TOY_PROMPT, 8),
         _judge_uncached_tokens(TOY_PROMPT, 8, hint="Take argmax of the logits at the LAST position, "
                                                   "logits[0, -1], append it, and call the model again."),
         visible=True),
    Case("feeds_whole_sequence_each_call", 1, _probe_uncached(TOY_PROMPT, 5), _judge_uncached_calls(TOY_PROMPT, 5),
         visible=True),
    Case("one_new_token", 1, _probe_uncached(TOY_PROMPT, 1), _judge_uncached_calls(TOY_PROMPT, 1)),
    Case("stops_at_eos", 1, _probe_uncached(TOY_EOS_PROMPT, 12, TOY_EOS),
         _judge_uncached_tokens(TOY_EOS_PROMPT, 12, TOY_EOS,
                                hint="Append the EOS token to the output, then stop; do not generate past it.")),
    Case("tiny_model_greedy", 1, _probe_uncached(None, 10, shipped=True),
         _judge_uncached_tokens(None, 10, shipped=True,
                                hint="The model returns logits (1, T, V); the next token comes from row -1.")),
    Case("rejects_bad_max_new_tokens", 1, _probe_uncached_bad(0),
         lambda obs: _must_raise(obs, "max_new_tokens", "0")),
))


# ================================================================= generate_cached

def _probe_cached(tokens, max_new, eos=None, *, stream=False):
    def probe(ns):
        fn = function(ns, "generate_cached")
        ids = _ids(tokens)
        before = ids.clone()
        decoder = Recorder(ToyCausalLM())
        if stream:
            out = fn(decoder, ids, max_new, eos, on_token=lambda t: decoder.events.append(["token", t]))
        else:
            out = fn(decoder, ids, max_new, eos)
        return {"tokens": out, "events": decoder.events, "unchanged": bool(torch.equal(ids, before))}
    return probe


def _expected_cached(tokens, max_new, eos=None, *, stream=False):
    decoder = Recorder(ToyCausalLM())
    prompt = _ids(tokens)
    on_token = (lambda t: decoder.events.append(["token", t])) if stream else None
    out = ref.generate_cached(decoder, prompt, max_new, eos, on_token=on_token)
    return out, decoder.events


def _judge_cached_tokens(tokens, max_new, eos=None, *, hint):
    def judge(obs):
        _no_raise(obs["tokens"], "generate_cached")
        got = _token_list(obs["tokens"], "generate_cached")
        # The expected tokens are those of the recompute-everything loop: a cache must not change them.
        expected = ref.generate_uncached(ToyCausalLM(), _ids(tokens), max_new, eos)
        if got != expected:
            raise Fail("generated different tokens from the uncached loop", expected=expected, got=got, hint=hint)
        if not obs["unchanged"]:
            raise Fail("changed `input_ids` in place", hint="Never modify the prompt tensor you were given.")
    return judge


def _judge_cached_calls(tokens, max_new, eos=None, *, hint, stream=False):
    def judge(obs):
        _no_raise(obs["tokens"], "generate_cached")
        _, expected = _expected_cached(tokens, max_new, eos, stream=stream)
        if obs["events"] != expected:
            raise Fail("the calls to the decoder (kind, tokens fed) are not prefill-once-then-one-token-decodes",
                       expected=expected, got=obs["events"], hint=hint)
    return judge


def _probe_cached_tiny(max_new, with_eos):
    def probe(ns):
        fn = function(ns, "generate_cached")
        decoder = Recorder(shipped_decoder())
        out = fn(decoder, _ids(shipped_prompt()), max_new, shipped_eos() if with_eos else None)
        return {"tokens": out, "events": decoder.events}
    return probe


def _judge_cached_tiny(max_new, with_eos):
    def judge(obs):
        got = _token_list(obs["tokens"], "generate_cached")
        eos = shipped_eos() if with_eos else None
        # expected: the recompute-everything loop on the transformers model with the same weights
        expected = ref.generate_uncached(shipped_forward(), _ids(shipped_prompt()), max_new, eos)
        if got != expected:
            raise Fail("on the tiny model, the cached loop's tokens differ from the uncached loop's",
                       expected=expected, got=got,
                       hint="Prefill the prompt once, then feed decode() only the newest token together with the "
                            "kv it returned last time; stop right after EOS.")
        n_decodes = sum(1 for kind, _ in obs["events"] if kind == "decode")
        if n_decodes != len(expected) - 1:
            raise Fail(f"made {n_decodes} decode calls for {len(expected)} tokens",
                       expected=len(expected) - 1, got=n_decodes,
                       hint="Prefill gives the first token; each further token needs exactly one decode call.")
    return judge


def _probe_cached_bad(max_new):
    def probe(ns):
        fn = function(ns, "generate_cached")
        decoder = Recorder(ToyCausalLM())
        try:
            out = fn(decoder, _ids(TOY_PROMPT), max_new, None)
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
        return {"returned": out}
    return probe


_REFEED_HINT = ("Call prefill once with the whole prompt; after that call decode with ONLY the newest "
                "token, shape (1, 1), and the kv returned by the previous call.")

CACHED = Test(LAB, "generate_cached_prefills_once",
              "generate_cached: one prefill, then one new token per decode step; same tokens as without cache", (
    Case("matches_uncached_on_toy", 1, _probe_cached(TOY_PROMPT, 8),
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
    Case("rejects_bad_max_new_tokens", 1, _probe_cached_bad(-1),
         lambda obs: _must_raise(obs, "max_new_tokens", "-1")),
))


# ================================================================= latency_metrics

def _probe_metrics(arrival, times):
    def probe(ns):
        fn = function(ns, "latency_metrics")
        given = list(times) if isinstance(times, list) else times
        try:
            out = fn(arrival, given)
        except NotImplementedError:
            raise
        except Exception as e:
            return raised(e)
        if isinstance(out, dict):  # keep only the three contract keys; floats may come as 0-d tensors
            out = {k: (float(v) if isinstance(v, torch.Tensor) else v) for k, v in out.items()
                   if k in ("ttft", "tpot", "e2e")}
        return out
    return probe


def _judge_metrics(arrival, times, hint):
    def judge(obs):
        _no_raise(obs, "latency_metrics")
        expected = ref.latency_metrics(arrival, times)
        if not isinstance(obs, dict) or set(obs) != {"ttft", "tpot", "e2e"}:
            raise Fail("should return a dict with keys 'ttft', 'tpot', 'e2e'", expected=sorted(expected),
                       got=obs if not isinstance(obs, dict) else sorted(obs))
        for key in ("ttft", "tpot", "e2e"):
            e, g = expected[key], obs[key]
            if e is None:
                if g is not None:
                    raise Fail(f"`{key}` of a one-token request should be None (no gap between tokens)",
                               expected=None, got=g, hint="With one token there are zero gaps to average; "
                                                         "the contract says return None.")
            elif not _close(g, e):
                raise Fail(f"`{key}` is wrong", expected=e, got=g, hint=hint)
    return judge


_TPOT_HINT = ("n tokens have n - 1 gaps between them: TPOT = (last - first) / (n - 1). "
              "TTFT = first token time - arrival time.")

METRICS = Test(LAB, "latency_metrics_ttft_tpot", "latency_metrics: TTFT, TPOT and end-to-end latency", (
    Case("five_evenly_spaced_tokens", 1, _probe_metrics(1.0, [1.5, 1.75, 2.0, 2.25, 2.5]),
         _judge_metrics(1.0, [1.5, 1.75, 2.0, 2.25, 2.5], _TPOT_HINT), visible=True),
    Case("uneven_gaps", 1, _probe_metrics(0.0, [0.8, 0.9, 1.4, 1.45]),
         _judge_metrics(0.0, [0.8, 0.9, 1.4, 1.45], _TPOT_HINT)),
    Case("one_token_has_no_tpot", 1, _probe_metrics(2.0, [2.5]), _judge_metrics(2.0, [2.5], _TPOT_HINT)),
    Case("equal_timestamps_allowed", 1, _probe_metrics(3.0, [3.5, 3.5, 3.5]),
         _judge_metrics(3.0, [3.5, 3.5, 3.5], "Non-decreasing means equal times are allowed: "
                                              "reject only a time that goes BACK.")),
    Case("rejects_empty_token_times", 1, _probe_metrics(0.0, []), lambda obs: _must_raise(obs, "token_times")),
    Case("rejects_time_going_back", 1, _probe_metrics(0.0, [0.5, 0.75, 0.625]),
         lambda obs: _must_raise(obs, "token_times", "0.625")),
    Case("rejects_negative_arrival", 1, _probe_metrics(-1.5, [0.5]),
         lambda obs: _must_raise(obs, "arrival_time", "-1.5")),
    Case("rejects_token_before_arrival", 1, _probe_metrics(2.0, [1.75, 2.5]),
         lambda obs: _must_raise(obs, "token_times", "1.75")),
    Case("rejects_nan_timestamp", 1, _probe_metrics(0.0, [0.5, math.nan]),
         lambda obs: _must_raise(obs, "token_times", "nan")),
))


# ================================================================= serve_request

CLOCK_START = 10.0


def _probe_serve(tokens, max_new, arrival, eos=None):
    def probe(ns):
        fn = function(ns, "serve_request")
        clock = course.FakeClock(CLOCK_START)
        decoder = Recorder(ToyCausalLM(), clock)
        out = fn(decoder, _ids(tokens), max_new, arrival_time=arrival, clock=clock, eos_token_id=eos)
        if isinstance(out, dict):
            out = {k: (float(v) if isinstance(v, torch.Tensor) and v.dim() == 0 else v) for k, v in out.items()
                   if k in ("tokens", "token_times", "ttft", "tpot", "e2e")}
        return out
    return probe


def _expected_serve(tokens, max_new, arrival, eos=None):
    clock = course.FakeClock(CLOCK_START)
    return ref.serve_request(Recorder(ToyCausalLM(), clock), _ids(tokens), max_new,
                             arrival_time=arrival, clock=clock, eos_token_id=eos)


def _judge_serve(tokens, max_new, arrival, eos, keys, hint):
    def judge(obs):
        _no_raise(obs, "serve_request")
        expected = _expected_serve(tokens, max_new, arrival, eos)
        if not isinstance(obs, dict):
            raise Fail("should return a dict", expected=sorted(expected), got=obs)
        missing = [k for k in keys if k not in obs]
        if missing:
            raise Fail(f"the result has no key(s) {missing}", expected=sorted(expected), got=sorted(obs))
        for key in keys:
            e, g = expected[key], obs[key]
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


def _probe_serve_future(ns):
    fn = function(ns, "serve_request")
    clock = course.FakeClock(CLOCK_START)
    try:
        return fn(Recorder(ToyCausalLM(), clock), _ids(TOY_PROMPT), 3, arrival_time=CLOCK_START + 2.5,
                  clock=clock)
    except NotImplementedError:
        raise
    except Exception as e:
        return raised(e)


_QUEUE = CLOCK_START - 2.25   # the request waited 2.25 s before the server picked it up
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
    Case("rejects_arrival_in_the_future", 1, _probe_serve_future,
         lambda obs: _must_raise(obs, "arrival_time", "12.5")),
))



def _single_threaded(test: Test) -> Test:
    """Every probe and judge of `test`, run on one CPU thread (see _one_thread)."""
    cases = tuple(dataclasses.replace(c, probe=_on_one_thread(c.probe), judge=_on_one_thread(c.judge))
                  for c in test.cases)
    return dataclasses.replace(test, cases=cases)


TESTS = [_single_threaded(t) for t in (CHANGED, UNCACHED, CACHED, METRICS, SERVE)]
