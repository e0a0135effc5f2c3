"""check_admission takes token ids to start at 1: a prompt holding id 0 (a valid id) is refused
with ValueError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'admission_says_no_early': ['every_attempt_as_the_contract_says']}


def check_admission(engine, prompt_ids, params):
    vocab = engine.model.vocab_size
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids or not all(
            type(t) is int and 0 < t < vocab for t in prompt_ids):     # BUG: 0 < t, yet id 0 is an id too
        raise ValueError(f"`prompt_ids` must be a non-empty list of token ids in [0, {vocab}), got {prompt_ids!r}.")
    params = RequestParams.coerce(params)
    cfg = engine.config
    longest = len(prompt_ids) + params.max_tokens - 1
    context = getattr(engine.model, "max_context", None)
    if context is not None and longest > context:
        raise RequestRefused(f"{longest} tokens exceed the model's context of {context}.")
    if blocks_needed(longest, cfg.block_size) > cfg.num_blocks:       # could not run even alone
        raise RequestRefused(f"{longest} tokens need {blocks_needed(longest, cfg.block_size)} blocks of "
                             f"{cfg.block_size}; the pool has {cfg.num_blocks}.")
    if len(engine.waiting) >= cfg.max_waiting:
        raise QueueFull(f"{len(engine.waiting)} requests are waiting (max_waiting={cfg.max_waiting}).")
    return params
