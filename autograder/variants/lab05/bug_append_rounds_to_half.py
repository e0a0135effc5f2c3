"""Rounds keys and values to float16 on their way into the cache ("a KV cache is half precision"),
although the pool is float32: every greedy token stays the same, but the logits move by about
1.4e-3, far past the rounding budget (LOGIT_ATOL = 1e-4, autograder/graders/README.md). The
smallest wrong cache in view: it shows the logits tolerance is not wide enough to hide one."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'paged_cache_matches_static': ['tiny_model_parity_block_4', 'tiny_model_parity_block_1_and_16']}


class PagedKVCache(PagedKVCache):
    def append(self, layer, k, v):
        return super().append(layer, k.half().float(), v.half().float())   # BUG: float16 precision
