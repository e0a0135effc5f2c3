"""length reports how many tokens layer 0 holds: the same as every layer's between forward passes,
one step ahead in the middle of one."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'paged_cache_matches_static': ['length_is_what_every_layer_holds']}


class PagedKVCache(PagedKVCache):
    @property
    def length(self):
        return self.filled[0]                   # BUG: not the smallest per-layer count
