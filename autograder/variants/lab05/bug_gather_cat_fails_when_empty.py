"""Gathers by concatenating the table's blocks with torch.cat: right in token order, but an empty cache
(fresh, or after release()) has no block to concatenate, so gather(layer) raises instead of returning
(1, H, 0, D)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'paged_cache_matches_static': ['release_returns_every_block']}


class PagedKVCache:

    def __init__(self, pool):
        self.pool = pool
        self.table = []                         # block ids, in token order
        self.filled = [0] * pool.n_layer        # tokens written per layer

    @property
    def length(self):
        return min(self.filled)

    @property
    def block_table(self):
        return list(self.table)

    def bytes_allocated(self):
        return len(self.table) * self.pool.block_bytes()

    def reserve(self, n_tokens):
        missing = blocks_needed(max(self.filled) + n_tokens, self.pool.block_size) - len(self.table)
        if missing > 0:
            self.table = self.table + self.pool.allocator.allocate(missing)   # all or nothing

    def append(self, layer, k, v):
        start, t = self.filled[layer], k.shape[2]
        bs = self.pool.block_size
        missing = blocks_needed(start + t, bs) - len(self.table)
        if missing > 0:                              # may raise OutOfBlocks: nothing written yet
            self.table = self.table + self.pool.allocator.allocate(missing)
        for i in range(t):                           # token by token: clear, and fast enough here
            p = start + i
            block, slot = self.table[p // bs], p % bs
            self.pool.k[layer, block, :, slot] = k[0, :, i]      # (H, D)
            self.pool.v[layer, block, :, slot] = v[0, :, i]
        self.filled[layer] = start + t
        return self.gather(layer)

    def gather(self, layer):
        T = self.filled[layer]
        k = torch.cat([self.pool.k[layer, b] for b in self.table], dim=1)[:, :T].unsqueeze(0)   # BUG: no blocks
        v = torch.cat([self.pool.v[layer, b] for b in self.table], dim=1)[:, :T].unsqueeze(0)   # (1, H, T, D)
        return k, v

    def release(self):
        table, self.table = self.table, []
        self.filled = [0] * self.pool.n_layer
        if table:
            self.pool.allocator.free(table)
