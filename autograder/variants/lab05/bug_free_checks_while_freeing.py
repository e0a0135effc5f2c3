"""Checks each id just before freeing it, walking the list from the end (the tail of a sequence goes
back first): free([b, 99]) meets 99 first and changes nothing, but free([99, b]) has already freed b
when it meets 99."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['validates_every_id_before_freeing_any',
                                                'repeated_id_in_one_free_call']}


class BlockAllocator(BlockAllocator):
    def free(self, block_ids):
        for b in reversed(block_ids):            # BUG: validated one at a time, while freeing
            if type(b) is not int or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            if self.refs[b] == 0:
                raise ValueError(f"block id {b} is already free (double free).")
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)
