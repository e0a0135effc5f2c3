"""The engine as a whole (schedule and run_batch at work): the hidden cases of the cell
engine_runs_each_request_as_if_alone."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import one_thread
from autograder.core import Fail, describe
from autograder.rounding import LOGIT_ATOL
from autograder.reference import lab07 as ref

from .judging import data, per_request, same_requests
from .probes import tiny_model, tiny_prompts, tiny_tokenizer

pytestmark = pytest.mark.cell("engine_runs_each_request_as_if_alone",
                              description="continuous batching changes no request's tokens")
ALONE_HINT = ("Feed each request exactly the tokens its cache lacks (prompt + generated tokens, from "
              "cache.length on), sample from ITS row of the logits, and append the token to ITS list.")


@pytest.mark.probe("trace", "staggered")
@pytest.mark.cell(points=2, visible=True)
def test_scripted_staggered_arrivals(observation):
    """Requests arriving at different steps get the tokens and endings they get alone."""
    with one_thread():
        same_requests(observation, "staggered", ("tokens", "finish"), ALONE_HINT)


@pytest.mark.probe("trace", "staggered")
def test_prefill_and_decode_share_a_forward(observation):
    """At most one forward per step, and a new request's prefill rides with the decodes."""
    with one_thread():
        obs = data(observation)
        for i, step in enumerate(obs["steps"]):
            if step["forwards"] > 1:
                raise Fail(f"step {i} called forward_batch {step['forwards']} times", expected="at most 1 per step",
                           got=step["forwards"], hint="Put every running request (prefills and decodes) in ONE "
                                                      "forward_batch call per step.")
        mixed = any(any(r[1] == 0 for r in call) and any(r[1] > 0 for r in call) for call in obs["log"])
        if not mixed:
            raise Fail("no forward pass held a new request's prefill together with running requests' decodes",
                       hint="Admit waiting requests at the start of the step and run them in the same batch as "
                            "the decodes of the running ones (continuous batching).")


@pytest.mark.probe("trace", "max_batch")
def test_max_batch_is_respected(observation):
    """No forward holds more than max_batch=2 requests, and every request still ends right."""
    with one_thread():
        obs = data(observation)
        worst = max((len(call) for call in obs["log"]), default=0)
        if worst > 2:
            raise Fail("a forward pass held more requests than max_batch=2", expected=2, got=worst,
                       hint="Admit only while len(running) < config.max_batch.")
        same_requests(obs, "max_batch")


def _logit_row(row, size) -> bool:
    return isinstance(row, list) and len(row) == size and \
        all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row)


@pytest.mark.probe("trace", "tiny")
@pytest.mark.cell(points=2)
def test_tiny_model_tokens_and_logits_equal_solo(observation):
    """On the tiny model, each request's tokens and logits equal its solo run (logits within 1e-4)."""
    with one_thread():
        obs = data(observation)
        got = per_request(obs)
        for name, prompt in tiny_prompts().items():
            want_tokens, want_logits = ref.solo_greedy(tiny_model(), prompt, 10, int(tiny_tokenizer().eos_token_id))
            if got.get(name, {}).get("tokens") != want_tokens:
                raise Fail(f"tiny model, request {name!r}: tokens differ from its solo run", expected=want_tokens,
                           got=got.get(name, {}).get("tokens"), hint=ALONE_HINT)
            rows = obs["logits"].get(name, [])
            if len(rows) < len(want_logits):
                raise Fail(f"tiny model, request {name!r}: fewer forward rows than tokens",
                           expected=len(want_logits), got=len(rows), hint=ALONE_HINT)
            # a preempted request has extra rows; compare the last row per token position
            for k, w in enumerate(want_logits):
                if not _logit_row(rows[k], w.numel()):
                    raise Fail(f"tiny model, request {name!r}: the logits of token {k} are not a row of "
                               f"{w.numel()} numbers", got=describe(rows[k]))
                diff = (torch.tensor(rows[k]) - w).abs().max().item()
                if diff > LOGIT_ATOL:
                    raise Fail(f"tiny model, request {name!r}: logits of token {k} differ from its solo run by "
                               f"{diff:.2e}", expected=f"within {LOGIT_ATOL}", got=diff, hint=ALONE_HINT)
