"""Gathers the blocks in order of block id instead of block-table order: right while a request's
blocks happen to be ascending, wrong once the pool is fragmented."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'paged_cache_matches_static': ['gather_follows_the_block_table', 'gather_when_block_ids_descend']}


class PagedKVCache(PagedKVCache):
    def gather(self, layer):
        T = self.filled[layer]
        idx = torch.tensor(sorted(self.table), dtype=torch.long, device=self.pool.k.device)   # BUG: block-id order
        H, D = self.pool.n_kv_heads, self.pool.head_dim
        k = self.pool.k[layer].index_select(0, idx)          # (n_blocks, H, bs, D)
        v = self.pool.v[layer].index_select(0, idx)
        k = k.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]   # (1, H, T, D)
        v = v.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]
        return k, v
