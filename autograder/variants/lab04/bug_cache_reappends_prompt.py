"""A "cached" loop that prefills the whole sequence again at every step. The tokens
are right, but the cost is the uncached loop's: every step re-feeds the prompt.
(Nor does it check the prompt or eos_token_id.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"generate_cached_prefills_once": ["one_prefill_then_single_token_decodes", "stops_at_eos",
                                                 "streams_each_token_before_next_step"]}

_generate_cached = generate_cached   # the solution's, kept before it is replaced (serve_request uses it)


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    # BUG: only max_new_tokens is checked, not the prompt nor eos_token_id
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")
    ids = input_ids.clone()
    new_tokens = []
    while True:
        logits, kv = decoder.prefill(ids)                    # BUG: the whole sequence again, the cache thrown away
        token = int(torch.argmax(logits[0, -1]))
        new_tokens.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_token_id or len(new_tokens) == max_new_tokens:
            return new_tokens
        ids = torch.cat([ids, torch.tensor([[token]], dtype=torch.long)], dim=1)


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    # the solution's, on the solution's generate_cached: the bug stays in generate_cached alone
    now = clock()
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) \
            or not math.isfinite(arrival_time):
        raise ValueError(f"`arrival_time` must be a finite number, got {arrival_time!r}.")
    if arrival_time > now:
        raise ValueError(f"`arrival_time` must not be later than the clock's current time {now!r}, "
                         f"got {arrival_time!r}.")
    token_times = []
    tokens = _generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                              on_token=lambda _token: token_times.append(clock()))
    return {"tokens": tokens, "token_times": token_times, **latency_metrics(arrival_time, token_times)}
