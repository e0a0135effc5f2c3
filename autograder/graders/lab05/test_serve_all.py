"""serve_all: the hidden cases of the cell memory_pressure_preempts_newest."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import one_thread, result_of
from autograder.core import Fail, describe
from autograder.reference import lab05 as ref

from ._inputs import TOY_PROMPT, ToyPagedLM, plain_result, shipped, shipped_requests
from .judging import EXACT_HINT, case, observed

pytestmark = pytest.mark.cell("memory_pressure_preempts_newest",
                              description="serve_all: refuse what can never fit, grow on demand, preempt the newest "
                                          "and recompute")

REQUESTS_FIT = [{"prompt": [3, 7, 1, 12, 5], "max_tokens": 9}, {"prompt": [2, 10, 11], "max_tokens": 7},
                {"prompt": [6, 6, 9, 1, 4, 8], "max_tokens": 5}]

_PREEMPT_HINT = ("When a decode raises OutOfBlocks, preempt the NEWEST running request: release its cache, put "
                 "it at the front of the waiting queue with the tokens it has, and prefill prompt + those tokens "
                 "when it is admitted again. Admit in order while the head's prefill fits the free blocks.")


def judge_serve(obs, requests, pool_blocks, block_size, hint, on_tiny_model=False, eos_token_id=None):
    """Each request's tokens and finish_reason are a solo run's, preemptions the reference's;
    the impossible refused (before any prefill); the pool whole at the end."""
    observed(observed(obs, "results", "pool", "prefills")["pool"], "num_free", "high_water")
    if on_tiny_model:
        decoder, eos = shipped()[0], None
        c = decoder.config
        reqs = shipped_requests()

        def new_pool(n):
            return ref.KVPool(c.n_layer, c.n_head, c.head_dim, n, block_size)
    else:
        decoder, eos, reqs = ToyPagedLM(), eos_token_id, requests

        def new_pool(n):
            return ref.KVPool(2, 1, 2, n, block_size)
    expected = [plain_result(r) for r in ref.serve_all(decoder, new_pool(pool_blocks), reqs, eos_token_id=eos)]
    got = result_of({"result": obs["results"]}, "serve_all(decoder, pool, requests)")
    if not isinstance(got, list) or len(got) != len(reqs):
        raise Fail("serve_all should return one result dict per request, in request order",
                   expected=len(reqs), got=describe(got))
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(g, dict):
            raise Fail(f"result {i} should be a dict", got=describe(g))
        if e["finish_reason"] == "error":
            if g.get("finish_reason") != "error" or g.get("tokens") != []:
                raise Fail(f"request {i} can never fit (needs more blocks than the pool has) and must be "
                           "refused: finish_reason error, no tokens", expected=e, got=g, hint=hint)
            if not (isinstance(g.get("error"), str) and g["error"]):
                raise Fail(f"request {i} was refused without saying why: its `error` should be a message",
                           expected="a non-empty str", got=g.get("error"),
                           hint="A refused request's `error` says why, e.g. how many blocks it needs and how many "
                                "the pool has.")
            continue
        if on_tiny_model:
            solo = ref.run_request(decoder, new_pool(64), torch.tensor([reqs[i]["prompt"]]),
                                   max_tokens=reqs[i]["max_tokens"], to_text=str, eos_token_id=eos)["tokens"]
        else:                                   # the toy alone on a fresh pool
            solo = ref.solo_tokens(decoder, reqs[i]["prompt"], reqs[i]["max_tokens"], eos_token_id=eos)
        if g.get("tokens") != solo or g.get("finish_reason") != e["finish_reason"]:
            raise Fail(f"request {i}: tokens and finish_reason should equal a solo run's",
                       expected=[solo, e["finish_reason"]], got=[g.get("tokens"), g.get("finish_reason")], hint=hint)
        if g.get("error") != e["error"]:
            raise Fail(f"request {i} ran to its end ({e['finish_reason']}), so its `error` should be None",
                       expected=e["error"], got=g.get("error"),
                       hint="`error` is for a refused request only; a request that runs keeps error None, however "
                            "often it was preempted (that count goes in `preemptions`).")
        if g.get("preemptions") != e["preemptions"]:
            raise Fail(f"request {i} was preempted {g.get('preemptions')} times",
                       expected=e["preemptions"], got=g.get("preemptions"), hint=hint)
    if obs["pool"]["num_free"] != pool_blocks:
        raise Fail("blocks are still in use after every request ended", expected=pool_blocks,
                   got=obs["pool"]["num_free"], hint="Release a request's cache when it finishes and when it "
                                                      "is preempted.")
    if obs["pool"]["high_water"] > pool_blocks:
        raise Fail("the high-water mark exceeds the pool", expected=f"<= {pool_blocks}",
                   got=obs["pool"]["high_water"])
    if not on_tiny_model:
        for i, e in enumerate(expected):
            if e["finish_reason"] == "error" and any(p[:len(reqs[i]["prompt"])] == reqs[i]["prompt"]
                                                     for p in obs["prefills"]):
                raise Fail(f"request {i} was prefilled although it can never fit",
                           expected="no model call for it", got="a prefill of its prompt", hint=hint)


# Hand-checked (toy decoder, see _inputs.ToyPagedLM). EXACT_FREE, 2 blocks of 2: r0 (2 tokens) takes 1 block;
# r1's sequence (1 token) needs 1 block with 1 free, so it is admitted; r0's decode at position 2 needs a
# block, the newest (r1) is preempted, recomputed after r0 ends: preemptions [0, 1].
# TWICE, 8 blocks of 1: r0, r1 (4 tokens), r2 take 1 + 4 + 1 blocks; r2's first decode finds none and
# preempts itself; r0 ends and frees 3; r2 (now 2 tokens) is admitted again with 2 of 2 free; r1's decode
# then finds none and preempts r2 again (the newest): preemptions [0, 0, 2].
EXACT_FREE = [{"prompt": [10, 8], "max_tokens": 2}, {"prompt": [7], "max_tokens": 2}]
TWICE = [{"prompt": [3], "max_tokens": 3}, {"prompt": [9, 3, 2, 9], "max_tokens": 4}, {"prompt": [7], "max_tokens": 3}]


def _serve(name, requests, pool_blocks, block_size, hint, points=1, visible=False, on_tiny_model=False, eos=None):
    return case(name, requests, pool_blocks, block_size, hint, on_tiny_model, eos,
                probe=("serve", requests, pool_blocks, block_size, on_tiny_model, eos), points=points,
                visible=visible)


IMPOSSIBLE = [{"prompt": [9, 9, 9, 9, 9, 9, 9, 9], "max_tokens": 18}] + REQUESTS_FIT[:2]
EXACT = [{"prompt": TOY_PROMPT, "max_tokens": 12}, {"prompt": [2, 10, 11], "max_tokens": 6}]


@pytest.mark.parametrize("requests, pool_blocks, block_size, hint, on_tiny_model, eos", [
    _serve("everything_fits", REQUESTS_FIT, 64, 2, _PREEMPT_HINT, visible=True),
    _serve("preempts_the_newest_and_recomputes", REQUESTS_FIT, 9, 2, _PREEMPT_HINT, points=3),
    _serve("refuses_impossible_before_any_model_call", IMPOSSIBLE, 12, 2,
           "Check every request against the WHOLE pool first (blocks_needed(prompt + max_tokens - 1) > "
           "num_blocks): refuse it at once, before any prefill.", points=2),
    _serve("runs_a_request_that_needs_exactly_the_pool", EXACT, 8, 2, EXACT_HINT),
    _serve("tiny_model_under_pressure", None, 9, 4, _PREEMPT_HINT, points=2, on_tiny_model=True),
    _serve("stops_at_eos_and_frees_at_once", REQUESTS_FIT, 9, 2,
           "With eos_token_id=7, requests 0 and 1 reach token 7 after 5 and 4 tokens: each ends there with "
           "finish_reason stop (7 is its last token) and gives its blocks back at once, so the others can use "
           "them. Check eos_token_id after every token, the prefill's included. " + _PREEMPT_HINT, eos=7),
    _serve("admits_when_the_sequence_needs_exactly_the_free_blocks", EXACT_FREE, 2, 2,
           "Pool of 2 blocks of 2. Request 0 (prompt of 2) holds 1 block; request 1's sequence (1 token) needs 1 "
           "block and 1 is free: \"no more blocks than are free\" admits it (needed <= free, not <). Request 0's "
           "next decode then preempts request 1, which is recomputed later: preemptions [0, 1]. " + _PREEMPT_HINT),
    _serve("preempted_twice_counts_two", TWICE, 8, 1,
           "Pool of 8 blocks of 1. Request 2 is preempted twice: first by its own decode (it is the newest), then, "
           "readmitted with 2 tokens, by request 1's decode. \"preemptions\" counts every preemption (+1 each "
           "time): expected [0, 0, 2]. " + _PREEMPT_HINT, visible=True),
])
def test_serve_all(observation, requests, pool_blocks, block_size, hint, on_tiny_model, eos):
    """serve_all on the toy (or the tiny model) with a pool that is large, tight or too small."""
    with one_thread():
        judge_serve(observation, requests, pool_blocks, block_size, hint, on_tiny_model, eos)
