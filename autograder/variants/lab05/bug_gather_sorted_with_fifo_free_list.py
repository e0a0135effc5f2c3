"""Gathers the blocks in order of block id, with a first-in first-out free list: that allocator hands
out ascending ids on a fresh pool and still after the interleaved sequences of
gather_follows_the_block_table, so that case lets the sorted gather through. Blocks that arrive in
descending order catch it whatever the allocation policy (so do the runs that share one pool)."""
from collections import deque

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'paged_cache_matches_static': ['gather_when_block_ids_descend'],
               'run_request_releases_on_every_ending': ['model_raises_at_every_step']}


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


class PagedKVCache(PagedKVCache):
    def gather(self, layer):
        T = self.filled[layer]
        idx = torch.tensor(sorted(self.table), dtype=torch.long, device=self.pool.k.device)   # BUG: id order
        H, D = self.pool.n_kv_heads, self.pool.head_dim
        k = self.pool.k[layer].index_select(0, idx)          # (n_blocks, H, bs, D)
        v = self.pool.v[layer].index_select(0, idx)
        k = k.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]   # (1, H, T, D)
        v = v.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]
        return k, v
