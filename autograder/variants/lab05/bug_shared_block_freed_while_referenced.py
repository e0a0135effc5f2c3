"""free() returns a block to the free list whatever its reference count: a shared prefix block goes
back to the pool while another request still reads it."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['shared_block_kept_until_last_user', 'random_operation_sequences']}


class BlockAllocator(BlockAllocator):
    def free(self, block_ids):
        uses = {}
        for b in block_ids:                      # validate everything first
            if type(b) is not int or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            uses[b] = uses.get(b, 0) + 1
            if uses[b] > self.refs[b]:
                raise ValueError(f"block id {b} is already free (double free).")
        for b in reversed(block_ids):            # the tail of a sequence goes back first
            if self.refs[b] > 0:
                self.refs[b] = 0                 # BUG: every user at once, not one
                self.free_ids.append(b)
