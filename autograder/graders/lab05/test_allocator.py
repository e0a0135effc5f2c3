"""BlockAllocator: the hidden cases of the cell block_allocator_invariants.

Each case replays operation sequences on the student's BlockAllocator(8, 4) and on the
reference's, observed the same id-agnostic way (_inputs.run_ops), step by step."""
from __future__ import annotations

import pytest

from autograder.core import Fail, describe
from autograder.reference import lab05 as ref

from ._inputs import allocator_sizes, run_ops, sequences
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
    _ops("validates_every_id_before_freeing_any",
         [[["allocate", 1, 0], ["unknown_free_first", 0, 91], ["allocate", 2, 0], ["free", 0, 1],
           ["bad_free_first", 0, 0]]],
         _STEP_FORMAT + "After allocate(1) gave block b, free([99, b]) must raise ValueError showing 99 AND "
         "leave b in use (refcount 1): check every id of the call before you change any count, whatever order "
         "you free them in. The same holds for free([a free id, b])."),
    _ops("repeated_id_in_one_free_call", [[["allocate", 2, 0], ["repeat_free", 0, 0], ["free", 0, 0]]],
         _STEP_FORMAT + "free([b, b]) on a block with one user frees it more times than it has users: raise "
         "ValueError showing b and free nothing. Count how often each id appears in the call before checking it "
         "against its refcount."),
    _ops("negative_id_is_unknown", [[["allocate", 8, 0], ["negative_free", 0, 0]]],
         _STEP_FORMAT + "Ids are 0 .. num_blocks - 1: free([b, -1]) must raise ValueError showing -1 and free "
         "nothing (in Python, a list indexed with -1 silently gives the last block's count)."),
    _ops("share_needs_a_block_in_use",
         [[["allocate", 2, 0], ["free", 0, 0], ["allocate", 1, 0], ["bad_share", 0, 0],
           ["unknown_share", 0, 3]]],
         _STEP_FORMAT + "share() of a block that is free (or of an id outside [0, num_blocks)) must raise "
         "ValueError: only a block in use can get one more user."),
    _ops("attributes_of_a_one_block_pool",
         [[["pool", 1, 16], ["attributes", 0, 0], ["allocate", 1, 0], ["allocate", 1, 0], ["free", 0, 0],
           ["allocate", 1, 0]]],
         _STEP_FORMAT + "BlockAllocator(1, 16) is a pool of one block of 16 tokens: num_blocks and block_size are "
         "attributes, as given (the attributes step notes [1, 16]); its one block can be allocated, a second "
         "allocate(1) raises OutOfBlocks, and after free the block can be allocated again."),
    _ops("share_counts_each_listed_id",
         [[["allocate", 2, 0], ["repeat_share", 0, 0], ["free", 0, 0], ["free", 0, 0], ["free", 0, 0],
           ["allocate", 8, 0]]],
         _STEP_FORMAT + "share([a, a]) gives block a one more user for each time it is listed: two, so a holds 3 "
         "users and needs three frees before it is free again. Do not collapse repeated ids (e.g. with set())."),
    _ops("random_operation_sequences", "fixtures",
         _STEP_FORMAT + "Compare your counts with the contract step by step.", points=3),
])
def test_operation_sequences(observation, seqs, hint):
    """Every step of every sequence observes what the reference's allocator does."""
    seqs = sequences(seqs)
    if not isinstance(observation, list) or len(observation) != len(seqs):
        raise Fail("the probe returned an unexpected observation", got=describe(observation))
    for i, (seq, got) in enumerate(zip(seqs, observation)):
        expected = run_ops(ref.BlockAllocator(*allocator_sizes(seq)), seq)
        if got != expected:
            got = got if isinstance(got, list) else []
            j = next((k for k, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
            step = list(seq[j]) if j < len(seq) else "free every request at the end"
            raise Fail(f"sequence {i}, step {j} ({step}) on a pool of {allocator_sizes(seq)[0]} blocks went "
                       "differently",
                       expected=expected[j] if j < len(expected) else None,
                       got=got[j] if j < len(got) else None, hint=hint)
