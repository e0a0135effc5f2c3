"""utilisation: the hidden cases of the cell utilisation_paged_vs_contiguous."""
from __future__ import annotations

import pytest

from autograder.checks import result_of
from autograder.core import Fail, describe, is_raised
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
    _util("contiguous_max_len", [[[5, 17, 3], {"max_len": 32}], [[5, 8], {"max_len": 8}]],
          "Contiguous: each request reserves max_len tokens up front. max_len may equal the longest length "
          "(lengths [5, 8] with max_len=8 reserve 16 tokens: 13 / 16 = 0.8125); only a shorter max_len is an "
          "error."),
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


@pytest.mark.probe("calls", "utilisation", [[[[5, 3]], {"block_size": 4, "max_len": 8}], [[[5, 3]], {}]])
def test_exactly_one_of_block_size_and_max_len(observation):
    """Both block_size and max_len, or neither: ValueError naming them."""
    for kw, rec in zip([{"block_size": 4, "max_len": 8}, {}], records(observation, 2)):
        call = call_text("utilisation", "[5, 3]", kw)
        got = rec["result"]
        if not (is_raised(got) and got.get("is_value_error")) or not any(
                p in got.get("message", "") for p in ("block_size", "max_len")):
            raise Fail(f"{call} should raise ValueError naming `block_size` and `max_len`", expected="ValueError",
                       got=describe(got) if is_raised(got) else got,
                       hint="Give exactly one of block_size (paged) and max_len (contiguous): with both, or with "
                            "neither, the question is ambiguous; raise ValueError instead of picking one.")


BAD_ARGUMENTS = [   # (param, label, args, kwargs)
    ("lengths", "[]", [[]], {"block_size": 4}),
    ("block_size", "[3], block_size=0", [[3]], {"block_size": 0}),
    ("max_len", "[30], max_len=16", [[30]], {"max_len": 16}),
    ("lengths", "[3, 2.5]", [[3, 2.5]], {"max_len": 8}),
    ("block_size", "[3], block_size='4'", [[3]], {"block_size": "4"}),
    ("max_len", "[5, 3], max_len=8.0", [[5, 3]], {"max_len": 8.0}),
]


@pytest.mark.probe("calls", "utilisation", calls_of(BAD_ARGUMENTS))
def test_rejects_bad_arguments(observation):
    """ValueError naming the parameter."""
    judge_rejects(observation, "utilisation", BAD_ARGUMENTS)
