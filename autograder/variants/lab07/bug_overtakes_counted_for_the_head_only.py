"""The bounded bypass, but only the head of the queue keeps a count of how often it was passed:
a second request that waits behind a big head is passed again and again and never counted, so
once the head runs, that one has already been passed more than max_overtakes times."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'scheduling_is_fcfs_and_preempts_the_newest': ['a_bypass_passes_nobody_too_often']}


def schedule(engine):
    cfg, bs, alloc = engine.config, engine.config.block_size, engine.pool.allocator
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
    if preempted:
        return list(engine.running)
    for cand in sorted(engine.waiting, key=lambda r: r.seq):
        if len(engine.running) >= cfg.max_batch:
            break
        head = min(engine.waiting, key=lambda r: r.seq)
        if cand is not head and getattr(head, "overtaken", 0) >= cfg.max_overtakes:   # BUG: only the head
            break
        keep = cfg.watermark_blocks if engine.running else 0
        if alloc.num_free - blocks_needed(len(cand.ids), bs) < keep:
            continue
        if cand is not head:
            head.overtaken = getattr(head, "overtaken", 0) + 1                        # BUG: only the head
        engine.waiting.remove(cand)
        cand.cache = PagedKVCache(engine.pool)
        cand.cache.reserve(len(cand.ids))
        engine.running.append(cand)
        engine.stage(cand, "prefill", engine.clock())
    return list(engine.running)
