"""BlockAllocator: the hidden cases of the cell block_allocator_invariants.

Each case replays operation sequences on the student's BlockAllocator(8, 4) and on the
reference's, observed the same id-agnostic way (_inputs.run_ops), step by step."""
from __future__ import annotations

import pytest

from autograder.core import Fail, describe
from autograder.reference import lab05 as ref

from ._inputs import run_ops, sequences
from .judging import case

pytestmark = pytest.mark.cell("block_allocator_invariants",
                              description="BlockAllocator: all-or-nothing, clear errors, reference counts, nothing "
                                          "lost")

_STEP_FORMAT = ("Each step is observed as [op, outcome, check, num_free, num_used, high_water, refcounts of "
                "each live request's blocks]. ")


def _ops(name, seqs, hint, points=1, visible=False):
    return case(name, seqs, hint, probe=("ops", seqs), points=points, visible=visible)


@pytest.mark.parametrize("seqs, hint", [
    _ops("all_or_nothing", [[["allocate", 3, 0], ["allocate", 5, 0], ["allocate", 5, 0], ["allocate", 0, 0],
                             ["free", 0, 0], ["allocate", 5, 0]]],
         _STEP_FORMAT + "An allocation that cannot get all its blocks must raise OutOfBlocks and leave "
         "the pool exactly as it was: check num_free BEFORE taking any block.", visible=True),
    _ops("distinct_ids_in_range", [[["allocate", 3, 0], ["allocate", 4, 0], ["free", 0, 0], ["allocate", 2, 0],
                                    ["allocate", 1, 0]]],
         _STEP_FORMAT + "The check is [n ids, all distinct, all in [0, num_blocks), each refcount 1]."),
    _ops("double_free_names_the_id", [[["allocate", 2, 0], ["allocate", 2, 0], ["bad_free", 0, 1],
                                       ["free", 0, 0], ["bad_free", 0, 0]]],
         _STEP_FORMAT + "Freeing a block that is already free raises ValueError whose message shows "
         "the id, and frees NOTHING (validate every id before changing any)."),
    _ops("unknown_id_names_the_id", [[["allocate", 3, 0], ["unknown_free", 0, 4], ["unknown_free", 0, 0]]],
         _STEP_FORMAT + "An id outside [0, num_blocks) raises ValueError showing the id; the valid id "
         "listed before it must not be freed."),
    _ops("shared_block_kept_until_last_user", [[["allocate", 2, 0], ["share", 0, 0], ["free", 0, 0],
                                                ["allocate", 6, 0], ["free", 0, 0], ["free", 0, 0],
                                                ["allocate", 8, 0]]],
         _STEP_FORMAT + "share() adds a user; free() removes one; a block returns to the free list only "
         "when its count reaches 0."),
    _ops("random_operation_sequences", "fixtures",
         _STEP_FORMAT + "Compare your counts with the contract step by step.", points=3),
])
def test_operation_sequences(observation, seqs, hint):
    """Every step of every sequence observes what the reference's allocator does."""
    seqs = sequences(seqs)
    if not isinstance(observation, list) or len(observation) != len(seqs):
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    for i, (seq, got) in enumerate(zip(seqs, observation)):
        expected = run_ops(ref.BlockAllocator(8, 4), seq)
        if got != expected:
            got = got if isinstance(got, list) else []
            j = next((k for k, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
            step = list(seq[j]) if j < len(seq) else "free every request at the end"
            raise Fail(f"sequence {i}, step {j} ({step}) on a pool of 8 blocks went differently",
                       expected=expected[j] if j < len(expected) else None,
                       got=got[j] if j < len(got) else None, hint=hint)
