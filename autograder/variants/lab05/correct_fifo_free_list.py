"""A correct allocator with another policy: a first-in first-out free list (the block freed longest
ago is handed out first, as a queue), everything else as in the solution. Block ids then arrive in
another order than the reference's stack gives; no case may depend on it."""
from collections import deque

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


class BlockAllocator(BlockAllocator):
    def __init__(self, num_blocks, block_size):
        super().__init__(num_blocks, block_size)
        self.free_ids = deque(range(num_blocks))          # oldest free block first

    def allocate(self, n):
        if n > len(self.free_ids):
            raise OutOfBlocks(f"need {n} blocks, {len(self.free_ids)} free of {self.num_blocks}")
        ids = [self.free_ids.popleft() for _ in range(n)]
        for b in ids:
            self.refs[b] = 1
        self.peak = max(self.peak, self.num_used)
        return ids
