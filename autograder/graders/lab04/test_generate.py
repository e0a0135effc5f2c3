"""generate_uncached and generate_cached: the hidden cases of the cells generate_uncached_recomputes
and generate_cached_prefills_once."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread, reference_rejects, rejects, result_of, unchanged
from autograder.core import Fail
from autograder.reference import lab04 as ref
from autograder.toy_models import Recorder, ToyCausalLM, ids

from .judging import case, no_calls, token_list
from .probes import (BAD_GENERATION, EOS, PROMPTS, TOY_PROMPT, shipped_decoder, shipped_eos, shipped_forward,  # noqa: F401
                     shipped_prompt)

UNCACHED = pytest.mark.cell("generate_uncached_recomputes",
                            description="generate_uncached: greedy tokens, one full forward per new token")
CACHED = pytest.mark.cell("generate_cached_prefills_once",
                          description="generate_cached: one prefill, then one new token per decode step; same "
                                      "tokens as without cache")


# ---------------------------------------------------------------- generate_uncached

def _expected_uncached(prompt, max_new, eos):
    shipped = prompt == "shipped"
    model = Recorder(shipped_forward() if shipped else ToyCausalLM())
    input_ids = ids(shipped_prompt() if shipped else PROMPTS[prompt])
    return ref.generate_uncached(model, input_ids, max_new, EOS[eos]), model.events


def judge_uncached_tokens(obs, prompt, max_new, eos, hint):
    with one_thread():
        call = f"generate_uncached(model, prompt, {max_new}, {EOS[eos]})"
        got = token_list(result_of(obs, call), "generate_uncached")
        expected, _ = _expected_uncached(prompt, max_new, eos)
        if got != expected:
            raise Fail("generated different tokens", expected=expected, got=got, hint=hint)
        unchanged(obs, call)


@UNCACHED
@pytest.mark.parametrize("prompt, max_new, eos, hint", [
    case("toy_model_8_tokens", "toy", 8, None, "Take argmax of the logits at the LAST position, logits[0, -1], "
         "append it, and call the model again.", probe=("uncached", "toy", 8), visible=True),
])
def test_uncached_tokens(observation, prompt, max_new, eos, hint):
    """The greedy tokens of the recompute-everything loop."""
    judge_uncached_tokens(observation, prompt, max_new, eos, hint)


@UNCACHED
@pytest.mark.parametrize("prompt, max_new", [
    case("feeds_whole_sequence_each_call", "toy", 5, probe=("uncached", "toy", 5), visible=True),
    case("one_new_token", "toy_one", 1, probe=("uncached", "toy_one", 1)),
])
def test_uncached_calls(observation, prompt, max_new):
    """One model call per new token, each fed the whole sequence so far."""
    with one_thread():
        result_of(observation, f"generate_uncached(model, prompt, {max_new}, None)")
        expected_tokens, expected = _expected_uncached(prompt, max_new, None)
        got = observation["events"]
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


@UNCACHED
@pytest.mark.parametrize("prompt, max_new, eos, hint", [
    case("stops_at_eos", "toy_eos", 12, "toy", "Append the EOS token to the output, then stop; do not generate "
         "past it.", probe=("uncached", "toy_eos", 12, "toy")),
    case("tiny_model_greedy", "shipped", 10, None, "The model returns logits (1, T, V); the next token comes from "
         "row -1.", probe=("uncached", "shipped", 10)),
])
def test_uncached_tokens_to_the_end(observation, prompt, max_new, eos, hint):
    """EOS included, then stop; the same loop on the tiny model."""
    judge_uncached_tokens(observation, prompt, max_new, eos, hint)


def judge_bad_max_new(obs, fn_name, values):
    with one_thread():
        for max_new, rec in zip(values, obs):
            call = f"{fn_name}(model, prompt, {max_new!r})"
            reference_rejects(getattr(ref, fn_name), (ToyCausalLM(), ids(TOY_PROMPT), max_new, None), {}, call)
            rejects(rec, call, "max_new_tokens", max_new)
            no_calls(rec, call, "max_new_tokens")


def judge_bad_generation(obs, fn_name):
    with one_thread():
        for (param, label, make, eos), rec in zip(BAD_GENERATION, obs):
            call = f"{fn_name}(model, ...) with {label}"
            reference_rejects(getattr(ref, fn_name), (ToyCausalLM(), make(), 4, eos), {}, call)
            rejects(rec, call, param, make() if param == "input_ids" else eos,
                    f"Validate `{param}` before any model call and raise ValueError naming it and showing the "
                    "value (for a tensor, its shape or dtype).")
            no_calls(rec, call, param)


@UNCACHED
@pytest.mark.parametrize("values", [case("rejects_bad_max_new_tokens", [0, True, 2.5],
                                         probe=("bad_max_new", "generate_uncached", [0, True, 2.5]))])
def test_uncached_rejects_bad_max_new_tokens(observation, values):
    """max_new_tokens 0, True or 2.5 raises ValueError naming it, before any model call."""
    judge_bad_max_new(observation, "generate_uncached", values)


@UNCACHED
@pytest.mark.parametrize("fn_name", [case("rejects_bad_prompt_and_eos", "generate_uncached",
                                          probe=("bad_generation", "generate_uncached"))])
def test_uncached_rejects_bad_prompt_and_eos(observation, fn_name):
    """A bad prompt or eos_token_id raises ValueError naming it, before any model call."""
    judge_bad_generation(observation, fn_name)


# ---------------------------------------------------------------- generate_cached

REFEED_HINT = ("Call prefill once with the whole prompt; after that call decode with ONLY the newest "
               "token, shape (1, 1), and the kv returned by the previous call.")


@CACHED
@pytest.mark.probe("cached", "toy", 8, None, False, True)
@pytest.mark.cell(visible=True)
def test_matches_uncached_on_toy(observation):
    """The tokens of the uncached loop, and again on a second request to the same decoder."""
    hint = ("Use the logits of the last position each step, and the kv the previous call returned (decode "
            "gives you a new one).")
    with one_thread():
        call = "generate_cached(decoder, prompt, 8, None)"
        got = token_list(result_of(observation, call), "generate_cached")
        # The expected tokens are those of the recompute-everything loop: a cache must not change them.
        expected = ref.generate_uncached(ToyCausalLM(), ids(TOY_PROMPT), 8, None)
        if got != expected:
            raise Fail("generated different tokens from the uncached loop", expected=expected, got=got, hint=hint)
        unchanged(observation, call)
        if "again" in observation and observation["again"] != expected:
            raise Fail("a second request on the same decoder gave different tokens", expected=expected,
                       got=observation["again"], hint="Keep no state between calls: each request starts with its "
                                                      "own prefill and its own kv.")


@CACHED
@pytest.mark.parametrize("prompt, max_new, eos, stream, hint", [
    case("one_prefill_then_single_token_decodes", "toy", 6, None, False, REFEED_HINT,
         probe=("cached", "toy", 6, None, False), visible=True, points=2),
    case("no_decode_after_last_token", "toy", 1, None, False, "Prefill already gives the first token; with "
         "max_new_tokens=1 no decode call is needed. Stop before decoding a token you will never use.",
         probe=("cached", "toy", 1, None, False)),
    case("stops_at_eos", "toy_eos", 12, "toy", False, "Append EOS to the output and stop at once: no decode call "
         "after it.", probe=("cached", "toy_eos", 12, "toy", False)),
    case("streams_each_token_before_next_step", "toy", 4, None, True, "Call on_token(token) as soon as a token is "
         "chosen, before the decode call that computes the next one.", probe=("cached", "toy", 4, None, True)),
])
def test_cached_calls(observation, prompt, max_new, eos, stream, hint):
    """One prefill of the whole prompt, then one single-token decode per further token."""
    with one_thread():
        result_of(observation, f"generate_cached(decoder, prompt, {max_new}, {EOS[eos]})")
        decoder = Recorder(ToyCausalLM())
        on_token = (lambda t: decoder.events.append(["token", t])) if stream else None
        ref.generate_cached(decoder, ids(PROMPTS[prompt]), max_new, EOS[eos], on_token=on_token)
        if observation["events"] != decoder.events:
            raise Fail("the calls to the decoder (kind, tokens fed) are not prefill-once-then-one-token-decodes",
                       expected=decoder.events, got=observation["events"], hint=hint)


@CACHED
@pytest.mark.parametrize("max_new, with_eos", [
    case("tiny_model_same_tokens_as_uncached", 16, False, probe=("cached_tiny", 16, False), points=2),
    case("tiny_model_tool_call_ends_on_eos", 48, True, probe=("cached_tiny", 48, True)),
])
def test_cached_on_the_tiny_model(observation, max_new, with_eos):
    """On the tiny model: the uncached loop's tokens, one decode per token after the first."""
    with one_thread():
        got = token_list(result_of(observation, f"generate_cached(tiny decoder, prompt, {max_new})"),
                         "generate_cached")
        eos = shipped_eos() if with_eos else None
        # expected: the recompute-everything loop on the transformers model with the same weights
        expected = ref.generate_uncached(shipped_forward(), ids(shipped_prompt()), max_new, eos)
        if got != expected:
            raise Fail("on the tiny model, the cached loop's tokens differ from the uncached loop's",
                       expected=expected, got=got,
                       hint="Prefill the prompt once, then feed decode() only the newest token together with the "
                            "kv it returned last time; stop right after EOS.")
        n_decodes = sum(1 for kind, _ in observation["events"] if kind == "decode")
        if n_decodes != len(expected) - 1:
            raise Fail(f"made {n_decodes} decode calls for {len(expected)} tokens",
                       expected=len(expected) - 1, got=n_decodes,
                       hint="Prefill gives the first token; each further token needs exactly one decode call.")


@CACHED
@pytest.mark.parametrize("values", [case("rejects_bad_max_new_tokens", [-1, True, 2.5],
                                         probe=("bad_max_new", "generate_cached", [-1, True, 2.5]))])
def test_cached_rejects_bad_max_new_tokens(observation, values):
    """max_new_tokens -1, True or 2.5 raises ValueError naming it, before any model call."""
    judge_bad_max_new(observation, "generate_cached", values)


@CACHED
@pytest.mark.parametrize("fn_name", [case("rejects_bad_prompt_and_eos", "generate_cached",
                                          probe=("bad_generation", "generate_cached"))])
def test_cached_rejects_bad_prompt_and_eos(observation, fn_name):
    """A bad prompt or eos_token_id raises ValueError naming it, before any model call."""
    judge_bad_generation(observation, fn_name)
