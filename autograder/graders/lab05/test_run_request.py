"""run_request: the hidden cases of the cell run_request_releases_on_every_ending.

Each run serves TOY_PROMPT on a fresh ToyPagedLM (on a FakeClock that advances 1.0 per
call); the runs of a case share one pool, which must be whole again after each."""
from __future__ import annotations

import pytest

from autograder.checks import audited, reference_rejects, rejects, result_of
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab05 as ref

from ._inputs import TOY_PROMPT, CallbackError, ToyPagedLM, allocator_state, ids, plain_result, toy_run, toy_text
from .judging import EXACT_HINT, case, observed

pytestmark = pytest.mark.cell("run_request_releases_on_every_ending",
                              description="run_request: every ending returns the result with its raw output and "
                                          "gives every block back")

_ENDING_HINT = ("Order within a step: cancel, then the deadline, then the model call (an exception or NaN "
                "logits ends the run with `error`), then append, content_filter, on_token, EOS (stop), "
                "max_tokens (length). raw_output is to_text(tokens) for EVERY ending.")
_FILTER_HINT = ("Ask content_filter before on_token: a token it rejects ends the run with content_filter and is "
                "never passed to on_token, though it stays in tokens and raw_output (as in Lab 03).")
RESULT_KEYS = ("tokens", "finish_reason", "raw_output")


def expected_run(setup, pool_blocks, block_size):
    """The reference's run on the same toy, pool and arguments: what the probe's record must say."""
    decoder_kw, kw = setup
    pool = audited(ref.KVPool(2, 1, 2, pool_blocks, block_size))
    decoder, kw = toy_run(decoder_kw, kw)
    try:
        res = ref.run_request(decoder, pool, ids(decoder.prompt), to_text=toy_text, **kw)
    except CallbackError as e:
        res = {"__raised__": "CallbackError", "message": str(e)}
    return {"result": plain_result(res), "pool": allocator_state(pool), "calls": len(decoder.calls),
            "streamed": decoder.streamed}


def _shown(key, value):
    if key == "on_token" and isinstance(value, dict):
        return f"<on_token raising at token {value['raise_at']}>"
    return repr(value)


def judge_runs(obs, setups, hint, pool_blocks=16, block_size=2, keys=RESULT_KEYS, stream_hint=_FILTER_HINT):
    if not isinstance(obs, list) or len(obs) != len(setups):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    for setup, got in zip(setups, obs):
        observed(got, "result", "pool", "calls", "streamed")
        observed(got["pool"], "num_free")
        expected = expected_run(setup, pool_blocks, block_size)
        call = f"run_request(toy, pool, prompt, {', '.join(f'{k}={_shown(k, v)}' for k, v in setup[1].items())}" + \
               (f") on a decoder with {setup[0]}" if setup[0] else ")")
        res = got["result"]
        if is_raised(expected["result"]):
            if not is_raised(res) or res["__raised__"] != expected["result"]["__raised__"]:
                raise Fail(f"{call}: the exception raised by on_token should reach the caller",
                           expected="CallbackError raised", got=describe(res), hint=hint)
        else:
            res = result_of({"result": res}, call)
            if not isinstance(res, dict):
                raise Fail(f"{call} should return a dict", got=describe(res))
            for key in keys:
                if res.get(key) != expected["result"][key]:
                    raise Fail(f"{call}: `{key}` is wrong", expected=expected["result"][key],
                               got=res.get(key, "(missing)"), hint=hint)
            if expected["result"]["error"] is not None and not (isinstance(res.get("error"), str) and res["error"]):
                raise Fail(f"{call}: `error` should say what went wrong", expected="a non-empty str",
                           got=res.get("error"), hint="Put the exception's type and message in `error`.")
        if got["pool"]["num_free"] != pool_blocks:
            raise Fail(f"{call} did not give its blocks back: {pool_blocks - got['pool']['num_free']} of "
                       f"{pool_blocks} still in use after it ended", expected=pool_blocks,
                       got=got["pool"]["num_free"],
                       hint="Release the cache in a `finally:` block, so every ending (return or exception) "
                            "frees it.")
        if got["calls"] != expected["calls"]:
            raise Fail(f"{call} made {got['calls']} model calls", expected=expected["calls"],
                       got=got["calls"], hint=hint)
        if got.get("streamed") != expected["streamed"]:
            raise Fail(f"{call}: on_token received the wrong tokens", expected=expected["streamed"],
                       got=got.get("streamed"), hint=stream_hint)


_STREAM_HINT = ("on_token comes before the EOS and max_tokens checks: the token that ends a run with stop or "
                "length is streamed too (only a token content_filter rejects is never streamed).")


def _runs(name, setups, hint, points=1, visible=False, pool_blocks=16, stream_hint=_FILTER_HINT):
    return case(name, setups, hint, pool_blocks, stream_hint, probe=("runs", setups, pool_blocks), points=points,
                visible=visible)


@pytest.mark.parametrize("setups, hint, pool_blocks, stream_hint", [
    _runs("eos_stop", [[None, {"max_tokens": 20, "eos_token_id": "eos"}]], _ENDING_HINT, visible=True),
    _runs("length", [[None, {"max_tokens": 6}]], _ENDING_HINT, visible=True),
    _runs("cancelled_releases", [[None, {"max_tokens": 20, "cancel_after": 3}],
                                 [None, {"max_tokens": 20, "cancel_after": 0}]], _ENDING_HINT),
    _runs("timeout_releases", [[None, {"max_tokens": 20, "deadline": 4.0}]], _ENDING_HINT),
    _runs("content_filter_releases", [[None, {"max_tokens": 20, "content_filter": "block"}]], _ENDING_HINT),
    _runs("rejected_token_never_reaches_on_token",
          [[None, {"max_tokens": 20, "content_filter": "block", "on_token": "record"}]], _FILTER_HINT),
    _runs("model_raises_at_every_step", [[{"fail_at": k}, {"max_tokens": 7}] for k in range(7)], _ENDING_HINT,
          points=2),
    _runs("nan_logits_at_every_step", [[{"nan_at": k}, {"max_tokens": 7}] for k in range(7)], _ENDING_HINT),
    _runs("callback_exception_propagates_and_releases",
          [[None, {"max_tokens": 7, "on_token": {"raise_at": k}}] for k in (0, 3)],
          "An exception from the caller's own on_token is theirs: let it propagate, but release the "
          "cache first (try/finally).", points=2),
    _runs("cancel_checked_before_deadline", [[None, {"max_tokens": 20, "cancel_after": 2, "deadline": 2.0}]],
          "After 2 model calls the request is cancelled AND 2.0 s have passed (its deadline): both end it at the "
          "same check, and cancel comes first, so finish_reason is cancelled, not timeout. " + _ENDING_HINT),
    _runs("max_tokens_one_returns_one_token", [[None, {"max_tokens": 1}]],
          "max_tokens=1 is valid (an int >= 1): the prefill gives the one token, and the run ends there with "
          "length after one model call, tokens [that token]. " + _ENDING_HINT),
    _runs("one_token_prompt", [[None, {"prompt": [5], "max_tokens": 4}]],
          "input_ids may hold a single token, shape (1, 1): T0 = input_ids.shape[1] = 1, so the run caches at "
          "most 1 + 4 - 1 = 4 tokens and generates 4. (squeeze() turns a (1, 1) tensor into a number without a "
          "length.) " + _ENDING_HINT),
    _runs("ending_token_reaches_on_token",
          [[None, {"max_tokens": 20, "eos_token_id": "eos", "on_token": "record"}],
           [None, {"max_tokens": 6, "on_token": "record"}]], _ENDING_HINT, stream_hint=_STREAM_HINT),
])
def test_run_ends(observation, setups, hint, pool_blocks, stream_hint):
    """Tokens, finish_reason and raw_output as the reference's; every block back; the same model calls."""
    judge_runs(observation, setups, hint, pool_blocks, stream_hint=stream_hint)


@pytest.mark.probe("runs", [[{"fail_at": 2}, {"max_tokens": 7}]], 16)
def test_error_names_the_exception(observation):
    """A model exception ends the run with `error` = "ExceptionType: message"."""
    setups = [[{"fail_at": 2}, {"max_tokens": 7}]]
    judge_runs(observation, setups, _ENDING_HINT)
    error = observation[0]["result"].get("error")
    want = "InjectedFailure: injected failure in call 2"
    if not isinstance(error, str) or "InjectedFailure" not in error or "injected failure in call 2" not in error:
        raise Fail("run_request(toy, pool, prompt, max_tokens=7) on a decoder whose call 2 raises "
                   "InjectedFailure('injected failure in call 2'): `error` should name the exception's type and "
                   "its message", expected=want, got=error,
                   hint="Write `error` as the exception's type name, a colon and its message "
                        "(type(e).__name__ and str(e)): the type says what failed, the message why.")


@pytest.mark.probe("runs", [[None, {"max_tokens": 40}], [None, {"max_tokens": 13}]], 8)
def test_refuses_impossible_before_prefill(observation):
    """A request that can never fit the pool is refused before any model call."""
    judge_runs(observation, [[None, {"max_tokens": 40}], [None, {"max_tokens": 13}]],
               "Compare blocks_needed(prompt + max_tokens - 1) with the pool's num_blocks BEFORE any model call; "
               "return finish_reason error with a message, no tokens.", pool_blocks=8,
               keys=("tokens", "finish_reason"))


@pytest.mark.probe("runs", [[None, {"max_tokens": 12}]], 8)
def test_runs_when_it_needs_exactly_the_pool(observation):
    """prompt + max_tokens - 1 tokens that fill the pool exactly: the request runs."""
    judge_runs(observation, [[None, {"max_tokens": 12}]], EXACT_HINT, pool_blocks=8)


@pytest.mark.probe("hundred_failures")
def test_no_growth_after_100_failing_requests(observation):
    """100 requests that fail (model error, NaN, the caller's exception) on one pool leave it whole."""
    observed(observed(observation, "pool")["pool"], "num_free", "high_water")
    if observation["pool"]["num_free"] != 12:
        raise Fail(f"after 100 failing requests {12 - observation['pool']['num_free']} of 12 blocks are still in "
                   "use", expected=12, got=observation["pool"]["num_free"],
                   hint="Every failure path (model error, NaN, the caller's exception) must release the cache.")
    if observation["pool"]["high_water"] > 12:
        raise Fail("the pool's high-water mark exceeds its size", expected="<= 12",
                   got=observation["pool"]["high_water"])


BAD_MAX_TOKENS = [0, 2.0, True]


@pytest.mark.probe("bad_max_tokens", BAD_MAX_TOKENS)
def test_rejects_bad_max_tokens(observation):
    """max_tokens 0, 2.0 or True: ValueError naming it, before any model call."""
    if not isinstance(observation, list) or len(observation) != len(BAD_MAX_TOKENS):
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    for value, rec in zip(BAD_MAX_TOKENS, observation):
        call = f"run_request(toy, pool, prompt, max_tokens={value!r}, to_text=...)"
        reference_rejects(ref.run_request, (ToyPagedLM(), ref.KVPool(2, 1, 2, 4, 2), ids(TOY_PROMPT)),
                          {"max_tokens": value, "to_text": toy_text}, call)
        observed(rec, "result", "calls")
        rejects(rec, call, "max_tokens", value,
                hint="max_tokens must be an int >= 1: a float (2.0) or a bool (True is 1 to Python) is not a count "
                     "of tokens. Check type(max_tokens) is int first and raise ValueError naming `max_tokens`.")
        if rec["calls"]:
            raise Fail(f"{call} called the model before rejecting `max_tokens`", expected=0, got=rec["calls"],
                       hint="Validate the arguments first, before any prefill.")
