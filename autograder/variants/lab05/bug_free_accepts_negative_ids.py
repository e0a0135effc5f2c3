"""Checks only the upper bound of an id: free([-1]) reads refs[-1], the last block's count, and frees
that block."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['negative_id_is_unknown']}


class BlockAllocator(BlockAllocator):
    def free(self, block_ids):
        uses = {}
        for b in block_ids:                      # validate everything first
            if type(b) is not int or b >= self.num_blocks:     # BUG: no lower bound
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            uses[b] = uses.get(b, 0) + 1
            if uses[b] > self.refs[b]:
                raise ValueError(f"block id {b} is already free (double free).")
        for b in reversed(block_ids):            # the tail of a sequence goes back first
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)
