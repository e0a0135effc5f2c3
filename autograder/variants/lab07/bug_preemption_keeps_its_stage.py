"""Preemption does not reopen the request's `queue` stage: its spans show one prefill and one
decode, as if it had never waited again."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'spans_and_metrics_through_the_tracer': ['preempted_request_reopens_queue']}


def schedule(engine):
    bs, alloc = engine.config.block_size, engine.pool.allocator
    preempted = False
    while engine.running and sum(r.blocks_to_feed(bs) for r in engine.running) > alloc.num_free:
        victim = engine.running.pop()
        victim.cache.release()
        victim.cache = None
        victim.preemptions += 1
        engine.preemptions += 1
        engine.waiting.appendleft(victim)
        # BUG: no engine.stage(victim, "queue", ...): its spans never show the second wait
        preempted = True
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if not preempted:
        while engine.waiting and len(engine.running) < engine.config.max_batch:
            head = engine.waiting[0]
            keep = engine.config.watermark_blocks if engine.running else 0
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                break
            engine.waiting.popleft()
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)
