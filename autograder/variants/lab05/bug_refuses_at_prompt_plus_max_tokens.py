"""Counts prompt + max_tokens tokens against the pool instead of prompt + max_tokens - 1: it forgets
that the last token is returned and never fed back, so it refuses (and plans for) a request that
needs exactly the whole pool."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'capacity_planning_counts_whole_blocks': ['last_token_is_never_cached'],
               'run_request_releases_on_every_ending': ['runs_when_it_needs_exactly_the_pool'],
               'memory_pressure_preempts_newest': ['runs_a_request_that_needs_exactly_the_pool']}


def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1):
    for name, value, low in (("budget_bytes", budget_bytes, 0), ("bytes_per_token", bytes_per_token, 1),
                             ("prompt_tokens", prompt_tokens, 1), ("max_tokens", max_tokens, 1),
                             ("block_size", block_size, 1)):
        if type(value) is not int or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    per_request = blocks_needed(prompt_tokens + max_tokens, block_size) * block_size * bytes_per_token  # BUG
    return budget_bytes // per_request


def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None):
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    tokens = []

    def ended(reason, error=None):
        return {"tokens": list(tokens), "finish_reason": reason, "raw_output": to_text(tokens), "error": error}

    T0 = input_ids.shape[1]
    need = blocks_needed(T0 + max_tokens, pool.block_size)   # BUG: no - 1
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


def serve_all(decoder, pool, requests, *, eos_token_id=None):
    results = [{"tokens": [], "finish_reason": None, "preemptions": 0, "error": None} for _ in requests]
    waiting = []
    for i, r in enumerate(requests):
        need = blocks_needed(len(r["prompt"]) + r["max_tokens"], pool.block_size)   # BUG: no - 1
        if need > pool.num_blocks:
            results[i]["finish_reason"] = FinishReason.ERROR
            results[i]["error"] = f"refused: needs {need} blocks, the pool has {pool.num_blocks}"
        else:
            waiting.append(i)
    running, caches = [], {}

    def take(i, logits):
        out = results[i]["tokens"]
        out.append(int(torch.argmax(logits[0, -1])))
        if out[-1] == eos_token_id or len(out) == requests[i]["max_tokens"]:
            results[i]["finish_reason"] = FinishReason.STOP if out[-1] == eos_token_id else FinishReason.LENGTH
            caches.pop(i).release()
            running.remove(i)

    while waiting or running:
        while waiting:
            i = waiting[0]
            seq = list(requests[i]["prompt"]) + results[i]["tokens"]
            if blocks_needed(len(seq), pool.block_size) > pool.allocator.num_free:
                break
            waiting.pop(0)
            caches[i] = PagedKVCache(pool)
            running.append(i)
            logits, _ = decoder.prefill(torch.tensor([seq]), kv=caches[i])
            take(i, logits)
        for i in list(running):
            while i in running:
                try:
                    logits, _ = decoder.decode(torch.tensor([[results[i]["tokens"][-1]]]), caches[i])
                except OutOfBlocks:
                    newest = running.pop()
                    caches.pop(newest).release()
                    waiting.insert(0, newest)
                    results[newest]["preemptions"] += 1
                    continue
                take(i, logits)
                break
    return results
