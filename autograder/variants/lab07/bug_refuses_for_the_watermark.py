"""check_admission still counts the watermark: a request whose prompt's blocks plus
watermark_blocks exceed the pool is refused, although it would run alone in an empty pool."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'admission_says_no_early': ['refuses_what_never_fits']}


def check_admission(engine, prompt_ids, params):
    vocab = engine.model.vocab_size
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids or not all(
            type(t) is int and 0 <= t < vocab for t in prompt_ids):
        raise ValueError(f"`prompt_ids` must be a non-empty list of token ids in [0, {vocab}), got {prompt_ids!r}.")
    params = RequestParams.coerce(params)
    cfg = engine.config
    longest = len(prompt_ids) + params.max_tokens - 1
    context = getattr(engine.model, "max_context", None)
    if context is not None and longest > context:
        raise RequestRefused(f"{longest} tokens exceed the model's context of {context}.")
    if blocks_needed(longest, cfg.block_size) > cfg.num_blocks or \
            blocks_needed(len(prompt_ids), cfg.block_size) + cfg.watermark_blocks > cfg.num_blocks:   # BUG
        raise RequestRefused(f"{longest} tokens need {blocks_needed(longest, cfg.block_size)} blocks of "
                             f"{cfg.block_size}; the pool has {cfg.num_blocks}.")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"{len(engine.waiting)} requests are waiting (max_waiting={cfg.max_waiting}).")
    return params
