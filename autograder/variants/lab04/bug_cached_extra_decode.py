"""Runs decode on every token it emits, including the last one: one wasted decode
step per request (its logits are never used). The tokens are right. (Nor does it check
the prompt or eos_token_id.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"generate_cached_prefills_once": ["one_prefill_then_single_token_decodes",
                                                 "no_decode_after_last_token", "stops_at_eos"]}


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    # BUG: only max_new_tokens is checked, not the prompt nor eos_token_id
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    logits, kv = decoder.prefill(input_ids.clone())
    new_tokens = []
    while True:
        token = int(torch.argmax(logits[0, -1]))
        new_tokens.append(token)
        if on_token is not None:
            on_token(token)
        step = torch.tensor([[token]], dtype=torch.long)
        logits, kv = decoder.decode(step, kv)                # BUG: also after the last token
        if token == eos_token_id or len(new_tokens) == max_new_tokens:
            return new_tokens
