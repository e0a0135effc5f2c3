"""Counts the generated tokens with `<=`: one token more than max_new_tokens, and one
model call more. (Nor does it check the prompt or eos_token_id.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"generate_uncached_recomputes": ["toy_model_8_tokens", "feeds_whole_sequence_each_call",
                                                "one_new_token", "tiny_model_greedy"]}


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    # BUG: only max_new_tokens is checked, not the prompt nor eos_token_id
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    ids = input_ids.clone()
    new_tokens = []
    while len(new_tokens) <= max_new_tokens:                # BUG: should be <
        logits = model(ids)
        token = int(torch.argmax(logits[0, -1]))
        new_tokens.append(token)
        if token == eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[token]], dtype=torch.long)], dim=1)
    return new_tokens
