"""check_admission uses params as given: a request whose params come as a dict or as None
raises AttributeError instead of being accepted."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'admission_says_no_early': ['params_as_a_dict_or_none']}


def check_admission(engine, prompt_ids, params):
    vocab = engine.model.vocab_size
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids or not all(
            type(t) is int and 0 <= t < vocab for t in prompt_ids):
        raise ValueError(f"`prompt_ids` must be a non-empty list of token ids in [0, {vocab}), got {prompt_ids!r}.")
    # BUG: params is used as given (a dict or None has no .max_tokens)
    cfg = engine.config
    longest = len(prompt_ids) + params.max_tokens - 1
    context = getattr(engine.model, "max_context", None)
    if context is not None and longest > context:
        raise RequestRefused(f"{longest} tokens exceed the model's context of {context}.")
    if blocks_needed(longest, cfg.block_size) > cfg.num_blocks:
        raise RequestRefused(f"{longest} tokens need {blocks_needed(longest, cfg.block_size)} blocks of "
                             f"{cfg.block_size}; the pool has {cfg.num_blocks}.")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"{len(engine.waiting)} requests are waiting (max_waiting={cfg.max_waiting}).")
    return params
