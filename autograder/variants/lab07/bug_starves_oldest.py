"""Admission skips a waiting request that does not fit and admits smaller ones behind it, so a
big request can wait for as long as small ones keep arriving."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'scheduling_is_fcfs_and_preempts_the_newest': ['fcfs_head_is_not_skipped', 'no_request_waits_forever']}


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
        for head in list(engine.waiting):
            if len(engine.running) >= engine.config.max_batch:
                break
            keep = engine.config.watermark_blocks if engine.running else 0
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                continue       # BUG: skips the oldest for whoever fits
            engine.waiting.remove(head)
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)
