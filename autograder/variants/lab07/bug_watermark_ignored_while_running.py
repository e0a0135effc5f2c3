"""Admission never keeps the watermark: while a request runs, a new one is admitted as soon as
its blocks fit, leaving fewer than watermark_blocks free for the running requests to grow into."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'scheduling_is_fcfs_and_preempts_the_newest': ['watermark_waits_while_others_run']}


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
            head = engine.waiting[0]
            keep = 0                                   # BUG: no watermark, even while others run
            if alloc.num_free - blocks_needed(len(head.ids), bs) < keep:
                break
            engine.waiting.popleft()
            head.cache = PagedKVCache(engine.pool)
            head.cache.reserve(len(head.ids))
            engine.running.append(head)
            engine.stage(head, "prefill", engine.clock())
    return list(engine.running)
