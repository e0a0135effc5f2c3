"""Fixtures of lab05: block-allocator operation sequences for the graders.

60 sequences of (op, n, pick) steps drawn by hypothesis with derandomize=True and no
example database, written once to allocator_ops.json: the graders read the file, so
every grade replays exactly the same sequences, with or without hypothesis installed
where the student's code runs. ops: allocate n blocks; share / free the request
`pick` (modulo the live requests); bad_free (one held id plus a free one) and
unknown_free (one held id plus num_blocks + pick) must raise and change nothing.
"""
from __future__ import annotations

from fixture_lib import dumps_listed

FIXTURES: list = []

OPS = ["allocate", "allocate", "share", "free", "free", "bad_free", "unknown_free"]


def allocator_sequences(n: int = 60) -> list[list[list]]:
    """n sequences of 10 to 30 steps (long enough to fill the pool of 8 blocks, share,
    and run out with blocks still free)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    found = []
    steps = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 6), st.integers(0, 40)), min_size=10,
                     max_size=30)

    @settings(derandomize=True, database=None, max_examples=n, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(steps)
    def collect(seq):
        found.append([list(step) for step in seq])

    collect()
    return found


def dumps(seqs) -> str:
    head = {"name": "allocator_ops", "schema_version": "allocator_ops/1", "num_blocks": 8, "block_size": 4,
            "description": "block-allocator operation sequences (lab05 graders), hypothesis derandomized"}
    return dumps_listed(head, "sequences", seqs)


_SEQS = allocator_sequences()

EXTRA_FILES = {"allocator_ops.json": dumps(_SEQS)}

README_SECTION = f"""
## Allocator operation sequences (lab05)

| name | sequences | steps | exercises | description |
| --- | --- | --- | --- | --- |
| `allocator_ops` | {len(_SEQS)} | {sum(len(s) for s in _SEQS)} | block_allocator | operation sequences on a pool of 8 blocks |

`allocator_ops.json`: {len(_SEQS)} sequences of `[op, n, pick]` steps on a pool of 8 blocks,
drawn once by hypothesis (`derandomize=True`, no example database) in
`datasets/generators/fixtures_lab05.py`. The lab05 graders replay them on the student's
`BlockAllocator` and on the reference, step by step. Not a logit fixture.
"""
