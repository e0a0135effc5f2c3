"""Validates the prompt and max_new_tokens but not eos_token_id: -1 (never generated)
and True (== 1, a real token id) are used as given."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"generate_uncached_recomputes": ["rejects_bad_prompt_and_eos"],
               "generate_cached_prefills_once": ["rejects_bad_prompt_and_eos"]}


def _check_generation_args(input_ids, max_new_tokens, eos_token_id):
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1 \
            or input_ids.shape[1] < 1 or input_ids.dtype != torch.long:
        got = (tuple(input_ids.shape), input_ids.dtype) if isinstance(input_ids, torch.Tensor) \
            else type(input_ids).__name__
        raise ValueError(f"`input_ids` must be a (1, T) long tensor with T >= 1, got {got}.")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    # BUG: eos_token_id is never checked
