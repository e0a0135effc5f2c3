"""Validates every id first, but checks each against its refcount alone: free([b, b]) on a block with
one user passes the check and frees it twice (its count goes to -1)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['repeated_id_in_one_free_call']}


class BlockAllocator(BlockAllocator):
    def free(self, block_ids):
        for b in block_ids:                      # validate everything first
            if type(b) is not int or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            if self.refs[b] == 0:                # BUG: a repeated id is not counted
                raise ValueError(f"block id {b} is already free (double free).")
        for b in reversed(block_ids):            # the tail of a sequence goes back first
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)
