"""Defaults block_size to 16 (vLLM's block size) instead of 1: called without block_size, a request's worst
case is rounded up to whole blocks of 16 tokens."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'capacity_planning_counts_whole_blocks': ['default_block_size_is_one', 'sizes_of_one_are_valid']}


def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=16):   # BUG: 16
    for name, value, low in (("budget_bytes", budget_bytes, 0), ("bytes_per_token", bytes_per_token, 1),
                             ("prompt_tokens", prompt_tokens, 1), ("max_tokens", max_tokens, 1),
                             ("block_size", block_size, 1)):
        if type(value) is not int or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    per_request = blocks_needed(prompt_tokens + max_tokens - 1, block_size) * block_size * bytes_per_token
    return budget_bytes // per_request
