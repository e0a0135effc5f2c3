"""check_admission checks only the pool: a request longer than the model's context is
accepted and fails later, inside the forward pass."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'admission_says_no_early': ['refuses_past_the_context']}


def check_admission(engine, prompt_ids, params):
    vocab = engine.model.vocab_size
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids or not all(
            type(t) is int and 0 <= t < vocab for t in prompt_ids):
        raise ValueError(f"`prompt_ids` must be a non-empty list of token ids in [0, {vocab}), got {prompt_ids!r}.")
    params = RequestParams.coerce(params)
    cfg = engine.config
    longest = len(prompt_ids) + params.max_tokens - 1
    # BUG: no look at engine.model.max_context: only the pool is checked
    if blocks_needed(longest, cfg.block_size) > cfg.num_blocks:
        raise RequestRefused(f"{longest} tokens need {blocks_needed(longest, cfg.block_size)} blocks of "
                             f"{cfg.block_size}; the pool has {cfg.num_blocks}.")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"{len(engine.waiting)} requests are waiting (max_waiting={cfg.max_waiting}).")
    return params
