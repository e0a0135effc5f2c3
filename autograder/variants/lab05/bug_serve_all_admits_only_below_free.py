"""Admits the head of the queue only while its sequence needs FEWER blocks than are free (`>=` where the
contract says no more than are free): a request that needs exactly the free blocks waits."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'memory_pressure_preempts_newest': ['admits_when_the_sequence_needs_exactly_the_free_blocks',
                                                  'preempted_twice_counts_two']}


def serve_all(decoder, pool, requests, *, eos_token_id=None):
    results = [{"tokens": [], "finish_reason": None, "preemptions": 0, "error": None} for _ in requests]
    waiting = []
    for i, r in enumerate(requests):
        need = blocks_needed(len(r["prompt"]) + r["max_tokens"] - 1, pool.block_size)
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
            if blocks_needed(len(seq), pool.block_size) >= pool.allocator.num_free:   # BUG: equal fits
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
