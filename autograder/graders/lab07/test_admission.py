"""check_admission (say no early): the hidden cases of the cell admission_says_no_early."""
from __future__ import annotations

import pytest

from autograder.checks import rejects
from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab07 as ref

from .probes import admission_attempts

pytestmark = [pytest.mark.cell("admission_says_no_early",
                               description="a full queue, a request that never fits, a bad prompt"),
              pytest.mark.probe("admission")]


def attempts(obs) -> dict:
    """{attempt: "accepted" or the exception record} as the admission probe gives it."""
    if not isinstance(obs, dict):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


@pytest.mark.cell(visible=True)
def test_queue_full(observation):
    """Two requests fit under max_waiting=2; the third raises QueueFull."""
    obs = attempts(observation)
    if obs.get("first") != "accepted" or obs.get("second") != "accepted":
        raise Fail("requests under max_waiting were refused", got=obs)
    g = obs.get("third")
    if not is_raised(g) or g["__raised__"] != "QueueFull":
        raise Fail("a request beyond max_waiting=2 waiting was not refused with QueueFull", expected="QueueFull",
                   got=describe(g) if g is not None else None,
                   hint="Raise QueueFull in add_request when len(waiting) >= max_waiting: say no now (HTTP 429).")


def test_refuses_what_never_fits(observation):
    """RequestRefused exactly when prompt + max_tokens - 1 tokens cannot fit the empty pool."""
    obs = attempts(observation)
    g = obs.get("too_big")
    if not is_raised(g) or g["__raised__"] != "RequestRefused":
        raise Fail("a request whose prompt + max_tokens - 1 tokens can never fit the pool was not refused",
                   expected="RequestRefused", got=describe(g) if g is not None else None,
                   hint="blocks_needed(len(prompt) + max_tokens - 1, block_size) > num_blocks: it would wait forever.")
    if obs.get("fits_alone") != "accepted":
        raise Fail("a request that fits the pool alone was refused because of the watermark", expected="accepted",
                   got=describe(obs.get("fits_alone")),
                   hint="Refuse only what could not run alone in an empty pool: the watermark is a reserve for "
                        "running requests, and a request that runs alone has nobody to keep it for.")
    if obs.get("just_fits") != "accepted":
        raise Fail("a request that fits the pool exactly was refused", expected="accepted",
                   got=describe(obs.get("just_fits")), hint="The last token is returned, never fed back: "
                                                            "count prompt + max_tokens - 1 tokens.")


def test_rejects_bad_prompt_ids(observation):
    """An empty prompt and an out-of-vocabulary id raise ValueError naming `prompt_ids`."""
    obs = attempts(observation)
    rejects({"result": obs.get("empty")}, "add_request([], params)", "prompt_ids", [])
    rejects({"result": obs.get("out_of_vocab")}, "add_request([99], params)", "prompt_ids", 99)


PARAMS_HINT = ("params may be anything RequestParams.coerce accepts (None, a dict, a RequestParams): return "
               "RequestParams.coerce(params), which the engine then reads as an object.")
CONTEXT_HINT = ("Refuse also when prompt + max_tokens - 1 tokens exceed engine.model.max_context (when the model "
                "has one): the model could not take them even alone.")


def test_params_as_a_dict_or_none(observation):
    """add_request with params as a plain dict and as None is accepted (check_admission coerces them)."""
    obs = attempts(observation)
    for key, given in (("dict_params", "a dict"), ("none_params", "None")):
        if obs.get(key) != "accepted":
            raise Fail(f"add_request([8], params) with params given as {given} was not accepted",
                       expected="accepted", got=describe(obs.get(key)), hint=PARAMS_HINT)


def test_refuses_past_the_context(observation):
    """RequestRefused when prompt + max_tokens - 1 tokens exceed the model's context, even when the pool fits them."""
    obs = attempts(observation)
    g = obs.get("past_context")
    if not is_raised(g) or g["__raised__"] != "RequestRefused":
        raise Fail("a request of 1 + 5 - 1 = 5 tokens on a model with a context of 4 was not refused",
                   expected="RequestRefused", got=describe(g) if g is not None else None, hint=CONTEXT_HINT)
    if obs.get("at_context") != "accepted":
        raise Fail("a request of exactly the model's context (1 + 4 - 1 = 4 tokens) was refused",
                   expected="accepted", got=describe(obs.get("at_context")), hint=CONTEXT_HINT)


VERDICT_HINT = ("check_admission's docstring decides every attempt: ValueError for prompt_ids that are not a non-empty "
                "list of int ids in [0, vocab_size) (0 is an id; a float is not), RequestRefused past the context "
                "or the empty pool (prompt + max_tokens - 1 tokens, exactly full is fine), QueueFull when "
                "len(waiting) >= max_waiting.")


def verdict(g):
    return g["__raised__"] if is_raised(g) else g


def test_every_attempt_as_the_contract_says(observation):
    """Every attempt (also id 0, the id vocab_size and a float id) accepted or refused with the
    exception the reference engine raises."""
    obs = attempts(observation)
    with one_thread():
        want = admission_attempts(ref.Engine)
    for key, w in want.items():
        if verdict(obs.get(key)) != verdict(w):
            raise Fail(f"add_request attempt {key!r}: accepted or refused otherwise than the contract says",
                       expected=verdict(w), got=describe(obs.get(key)), hint=VERDICT_HINT)
