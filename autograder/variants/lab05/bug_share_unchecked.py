"""share() adds a user to every id it is given without checking it is in use: a free block gets a
count of 1 while it stays on the free list, and an unknown id raises IndexError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['share_needs_a_block_in_use']}


class BlockAllocator(BlockAllocator):
    def share(self, block_ids):
        for b in block_ids:                      # BUG: no check that b is in use
            self.refs[b] += 1
