"""A correct engine with a priority policy, written as a small class: waiting requests are
served by (params.priority, arrival), lower priority values first as in vLLM, and a request
may only go ahead of an older one that has been passed fewer than config.max_overtakes times.
Inside that order it never skips a request for a smaller one (head-of-line, like FCFS); with all
priorities equal, or max_overtakes=0, it is first come, first served."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


class _Admission:
    def __init__(self, engine):
        self.engine, self.cfg = engine, engine.config

    def allowed(self, cand):
        """Admitting `cand` now passes every older waiting request: each must have room left."""
        return all(self.passed(w) < self.cfg.max_overtakes for w in self.engine.waiting if w.seq < cand.seq)

    @staticmethod
    def passed(req):
        return req.__dict__.get("passed_by", 0)

    def admit(self, cand):
        eng = self.engine
        for w in eng.waiting:
            if w.seq < cand.seq:
                w.passed_by = self.passed(w) + 1
        eng.waiting.remove(cand)
        cand.cache = PagedKVCache(eng.pool)
        cand.cache.reserve(len(cand.ids))
        eng.running.append(cand)
        eng.stage(cand, "prefill", eng.clock())

    def next_candidate(self):
        order = sorted(self.engine.waiting, key=lambda r: (r.params.priority, r.seq))
        return next((r for r in order if self.allowed(r)), None)   # the oldest is always allowed

    def fill(self):
        eng, bs = self.engine, self.cfg.block_size
        while eng.waiting and len(eng.running) < self.cfg.max_batch:
            cand = self.next_candidate()
            keep = self.cfg.watermark_blocks if eng.running else 0
            if eng.pool.allocator.num_free - blocks_needed(len(cand.ids), bs) < keep:
                return                  # the chosen one waits for room; nobody jumps it for size
            self.admit(cand)


def schedule(engine):
    bs, alloc = engine.config.block_size, engine.pool.allocator
    victims = []
    while engine.running and sum(r.blocks_to_feed(bs) for r in engine.running) > alloc.num_free:
        victims.append(engine.running.pop())
        victims[-1].cache.release()
        victims[-1].cache = None
    for v in victims:                  # the newest was popped first; the oldest victim ends in front
        v.preemptions += 1
        engine.preemptions += 1
        engine.waiting.appendleft(v)
        engine.stage(v, "queue", engine.clock())
    for req in engine.running:
        req.cache.reserve(len(req.ids) - req.cache.length)
    if not victims:
        _Admission(engine).fill()
    return list(engine.running)
