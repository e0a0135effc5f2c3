"""utilisation: the hidden cases of the cell utilisation_paged_vs_contiguous."""
from __future__ import annotations

import pytest

from autograder.checks import result_of
from autograder.core import Fail
from autograder.reference import lab05 as ref

from .judging import call_text, calls_of, case, judge_rejects, records

pytestmark = pytest.mark.cell("utilisation_paged_vs_contiguous",
                              description="utilisation: the share of reserved KV memory that holds tokens")


def _util(name, calls, hint, visible=False):
    return case(name, calls, hint, probe=("calls", "utilisation", [[[lengths], kw] for lengths, kw in calls]),
                visible=visible)


@pytest.mark.parametrize("calls, hint", [
    _util("paged_blocks", [[[5, 17, 3], {"block_size": 4}]],
          "Paged: each request holds ceil(n / block_size) whole blocks.", visible=True),
    _util("contiguous_max_len", [[[5, 17, 3], {"max_len": 32}]],
          "Contiguous: each request reserves max_len tokens up front."),
    _util("exact_blocks_are_full", [[[8, 16], {"block_size": 8}], [[1], {"block_size": 1}]],
          "Lengths that are multiples of block_size waste nothing."),
])
def test_utilisation(observation, calls, hint):
    """Tokens held / tokens reserved (whole blocks, or max_len per request)."""
    for (lengths, kw), rec in zip(calls, records(observation, len(calls))):
        call = call_text("utilisation", f"{lengths}", kw)
        got = result_of(rec, call)
        expected = ref.utilisation(lengths, **kw)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or abs(got - expected) > 1e-12:
            raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)


BAD_ARGUMENTS = [   # (param, label, args, kwargs)
    ("lengths", "[]", [[]], {"block_size": 4}),
    ("block_size", "[3], block_size=0", [[3]], {"block_size": 0}),
    ("max_len", "[30], max_len=16", [[30]], {"max_len": 16}),
]


@pytest.mark.probe("calls", "utilisation", calls_of(BAD_ARGUMENTS))
def test_rejects_bad_arguments(observation):
    """ValueError naming the parameter."""
    judge_rejects(observation, "utilisation", BAD_ARGUMENTS)
