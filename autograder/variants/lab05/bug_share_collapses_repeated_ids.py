"""Shares each distinct id once (a set of the ids): share([a, a]) gives block a one more user instead of two."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'block_allocator_invariants': ['share_counts_each_listed_id']}


class BlockAllocator:

    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refs = [0] * num_blocks
        self.free_ids = list(range(num_blocks - 1, -1, -1))   # a stack: pop() gives 0, 1, 2, ...
        self.peak = 0

    @property
    def num_free(self):
        return len(self.free_ids)

    @property
    def num_used(self):
        return self.num_blocks - len(self.free_ids)

    @property
    def high_water(self):
        return self.peak

    def allocate(self, n):
        if n > len(self.free_ids):
            raise OutOfBlocks(f"need {n} blocks, {len(self.free_ids)} free of {self.num_blocks}")
        ids = [self.free_ids.pop() for _ in range(n)]
        for b in ids:
            self.refs[b] = 1
        self.peak = max(self.peak, self.num_used)
        return ids

    def share(self, block_ids):
        for b in block_ids:
            if type(b) is not int or not 0 <= b < self.num_blocks or self.refs[b] == 0:
                raise ValueError(f"block id {b!r} is not in use, so it cannot be shared.")
        for b in set(block_ids):                    # BUG: a repeated id counts once
            self.refs[b] += 1

    def free(self, block_ids):
        uses = {}
        for b in block_ids:                      # validate everything first
            if type(b) is not int or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            uses[b] = uses.get(b, 0) + 1
            if uses[b] > self.refs[b]:
                raise ValueError(f"block id {b} is already free (double free).")
        for b in reversed(block_ids):            # the tail of a sequence goes back first
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)

    def refcount(self, block_id):
        return self.refs[block_id]
