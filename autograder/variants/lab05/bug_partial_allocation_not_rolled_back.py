"""Takes blocks one by one and raises OutOfBlocks when the free list runs dry, keeping the blocks it
already took: a refused allocation shrinks the pool."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['all_or_nothing', 'random_operation_sequences']}


class BlockAllocator(BlockAllocator):
    def allocate(self, n):
        ids = []
        for _ in range(n):
            if not self.free_ids:
                raise OutOfBlocks(f"need {n} blocks, ran out after {len(ids)}")   # BUG: keeps ids
            b = self.free_ids.pop()
            self.refs[b] = 1
            ids.append(b)
        self.peak = max(self.peak, self.num_used)
        return ids
