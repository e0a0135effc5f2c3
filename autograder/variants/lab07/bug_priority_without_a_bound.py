"""Priority admission (lower params.priority first) with no bound: a low-priority request that
waits is passed by every higher-priority arrival, however many come, so it can wait forever."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'scheduling_is_fcfs_and_preempts_the_newest': ['a_priority_passes_nobody_too_often']}


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
        engine.stage(victim, "queue", engine.clock())
        preempted = True
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if not preempted:
        while engine.waiting and len(engine.running) < engine.config.max_batch:
            head = min(engine.waiting, key=lambda r: (r.params.priority, r.seq))   # BUG: no bound on passing
            keep = engine.config.watermark_blocks if engine.running else 0
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                break
            engine.waiting.remove(head)
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)
