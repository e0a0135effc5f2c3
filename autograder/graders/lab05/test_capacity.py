"""requests_that_fit: the hidden cases of the cell capacity_planning_counts_whole_blocks."""
from __future__ import annotations

import pytest

from autograder.reference import lab05 as ref

from .judging import call_text, calls_of, case, int_result, judge_rejects, records

pytestmark = pytest.mark.cell("capacity_planning_counts_whole_blocks",
                              description="requests_that_fit: worst case per request, whole blocks, rounded down")

_GiB = 1 << 30


def _fit(name, args, kwargs, hint, visible=False):
    return case(name, args, kwargs, hint, probe=("calls", "requests_that_fit", [[list(args), kwargs]]),
                visible=visible)


@pytest.mark.parametrize("args, kwargs, hint", [
    _fit("llama_16_gib", [16 * _GiB, 131072, 1000, 1048], {},
         "Each request may cache prompt_tokens + max_tokens - 1 tokens; budget // bytes per request.", visible=True),
    _fit("whole_blocks_round_up", [32 * 100 * 10 + 99, 100, 9, 9], {"block_size": 16},
         "9 + 9 - 1 = 17 tokens in blocks of 16 take 2 blocks = 32 tokens of memory."),
    _fit("none_fit", [1000, 100, 6, 6], {}, "A budget below one request fits 0 requests."),
    _fit("zero_budget_fits_none", [0, 100, 6, 6], {},
         "requests_that_fit(0, ...) should return 0: budget_bytes may be 0 (no memory left fits no request); "
         "only a negative budget is an error."),
    _fit("last_token_is_never_cached", [1600, 100, 9, 8], {"block_size": 16},
         "The last token is returned, never fed back, so a request caches at most prompt_tokens + "
         "max_tokens - 1 tokens: 9 + 8 - 1 = 16 fill one block of 16."),
    _fit("default_block_size_is_one", [900, 100, 5, 5], {},
         "Without block_size, blocks are 1 token: 5 + 5 - 1 = 9 tokens * 100 bytes = 900 bytes, so a budget of "
         "900 fits exactly 1 request (with blocks of 2 it would need 10 tokens' worth and fit none)."),
    _fit("sizes_of_one_are_valid", [10, 1, 1, 1], {},
         "bytes_per_token, prompt_tokens and max_tokens may each be 1 (ints >= 1): a 1-token prompt with "
         "max_tokens=1 caches 1 + 1 - 1 = 1 token of 1 byte, so 10 bytes fit 10 requests."),
])
def test_requests_that_fit(observation, args, kwargs, hint):
    """The worst case of a request in whole blocks; budget // bytes per request."""
    call = call_text("requests_that_fit", f"{tuple(args)}", kwargs)
    int_result(records(observation, 1)[0], call, ref.requests_that_fit(*args, **kwargs), hint)


BAD_ARGUMENTS = [   # (param, label, args, kwargs)
    ("budget_bytes", "-1", [-1, 100, 5, 5], {}),
    ("bytes_per_token", "bytes_per_token=0", [], {"budget_bytes": 10, "bytes_per_token": 0, "prompt_tokens": 5,
                                                  "max_tokens": 5}),
    ("prompt_tokens", "prompt_tokens=0", [], {"budget_bytes": 10, "bytes_per_token": 100, "prompt_tokens": 0,
                                              "max_tokens": 5}),
    ("max_tokens", "max_tokens=0", [], {"budget_bytes": 10, "bytes_per_token": 100, "prompt_tokens": 5,
                                        "max_tokens": 0}),
    ("block_size", "block_size=0", [], {"budget_bytes": 10, "bytes_per_token": 100, "prompt_tokens": 5,
                                        "max_tokens": 5, "block_size": 0}),
]


@pytest.mark.probe("calls", "requests_that_fit", calls_of(BAD_ARGUMENTS))
def test_rejects_bad_arguments(observation):
    """ValueError naming the parameter."""
    judge_rejects(observation, "requests_that_fit", BAD_ARGUMENTS)
