"""Requires budget_bytes >= 1 like the other sizes: a budget of 0 (no memory left) raises ValueError
instead of fitting 0 requests."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'capacity_planning_counts_whole_blocks': ['zero_budget_fits_none']}


def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1):
    for name, value, low in (("budget_bytes", budget_bytes, 1), ("bytes_per_token", bytes_per_token, 1),  # BUG: 1
                             ("prompt_tokens", prompt_tokens, 1), ("max_tokens", max_tokens, 1),
                             ("block_size", block_size, 1)):
        if type(value) is not int or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    per_request = blocks_needed(prompt_tokens + max_tokens - 1, block_size) * block_size * bytes_per_token
    return budget_bytes // per_request
