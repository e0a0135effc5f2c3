"""Takes the prompt's length from input_ids.squeeze(): a one-token prompt (1, 1) squeezes to a 0-d tensor,
whose len() raises TypeError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'run_request_releases_on_every_ending': ['one_token_prompt']}


def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None):
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    tokens = []

    def ended(reason, error=None):
        return {"tokens": list(tokens), "finish_reason": reason, "raw_output": to_text(tokens), "error": error}

    T0 = len(input_ids.squeeze())                    # BUG: (1, 1) squeezes to a 0-d tensor
    need = blocks_needed(T0 + max_tokens - 1, pool.block_size)   # the last token is never fed back
    if need > pool.num_blocks:
        return ended(FinishReason.ERROR, f"refused: {T0} + {max_tokens} - 1 tokens need {need} blocks, "
                                         f"the pool has {pool.num_blocks}")
    start = clock() if clock is not None else 0.0
    cache = PagedKVCache(pool)
    try:
        while True:
            if cancel is not None and cancel.is_set():
                return ended(FinishReason.CANCELLED)
            if deadline is not None and clock() - start >= deadline:
                return ended(FinishReason.TIMEOUT)
            try:
                if not tokens:
                    logits, cache = decoder.prefill(input_ids, kv=cache)
                else:
                    logits, cache = decoder.decode(torch.tensor([[tokens[-1]]]), cache)
                row = logits[0, -1]
                if torch.isnan(row).any():
                    raise FloatingPointError(f"NaN logits at step {len(tokens)}")
            except Exception as e:
                return ended(FinishReason.ERROR, f"{type(e).__name__}: {e}")
            token = int(torch.argmax(row))
            tokens.append(token)
            if content_filter is not None and content_filter(token, to_text(tokens)):
                return ended(FinishReason.CONTENT_FILTER)       # before on_token: never shown
            if on_token is not None:
                on_token(token)
            if token == eos_token_id:
                return ended(FinishReason.STOP)
            if len(tokens) == max_tokens:
                return ended(FinishReason.LENGTH)
    finally:
        cache.release()                  # every return above, and any exception, passes here
