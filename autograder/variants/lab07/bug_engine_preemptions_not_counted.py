"""schedule counts a preemption on the request only: engine.preemptions stays 0."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'every_ending_frees_its_blocks': ['counts_and_final_outputs_after_preemptions']}


def schedule(engine):
    bs, alloc = engine.config.block_size, engine.pool.allocator
    preempted = False
    while engine.running and sum(r.blocks_to_feed(bs) for r in engine.running) > alloc.num_free:
        victim = engine.running.pop()
        victim.cache.release()
        victim.cache = None
        victim.preemptions += 1
        # BUG: engine.preemptions is not counted
        engine.waiting.appendleft(victim)
        engine.stage(victim, "queue", engine.clock())
        preempted = True
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if not preempted:
        while engine.waiting and len(engine.running) < engine.config.max_batch:
            head = engine.waiting[0]
            keep = engine.config.watermark_blocks if engine.running else 0   # nobody to keep it for
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                break
            engine.waiting.popleft()
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)
