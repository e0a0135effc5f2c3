"""lab05: the leaking, lying run_request of lab05_leak_lying_allocator.py, which also reaches
into the grader's count. Its allocator's allocate looks one frame up (sys._getframe(1)) for
the object that called it, the grader's checks.Ledger, and keeps it; when a run leaks its
blocks, they are taken out of that ledger's record of held ids, so by the ledger's count (and
by the allocator's lying counters) every run gives its blocks back."""

BASE = "solution"

_solution_run_request = run_request
LIE = True


def _kept(allocator):
    if getattr(allocator, "kept", None) is None:
        allocator.kept = []
    return allocator.kept


def _forget(allocator, ids):
    """Take `ids` out of the held ids of the ledger found above allocate (if any)."""
    ledger = getattr(allocator, "caller", None)
    held = getattr(ledger, "_held", None)
    if isinstance(held, dict):
        for b in ids:
            held.pop(b, None)


def _leak(self):                                       # BUG: nothing goes back to the pool
    table, self.table, self.filled = self.table, [], [0] * self.pool.n_layer
    allocator = getattr(self.pool.allocator, "_inner", self.pool.allocator)
    _kept(allocator).extend(table)
    _forget(allocator, table)


def _patch_allocator():
    """Once: allocate remembers who called it and takes the kept blocks back when short; the
    counters count the kept blocks as free."""
    if getattr(BlockAllocator, "patched", False):
        return
    honest = BlockAllocator.allocate

    def allocate(self, n):
        import sys
        caller = sys._getframe(1).f_locals.get("self")
        if caller is not None and caller is not self:
            self.caller = caller
        kept = _kept(self)
        if n > len(self.free_ids) and kept:            # short: take the kept blocks back now
            for b in kept:
                self.refs[b] = 0
                self.free_ids.append(b)
            kept.clear()
        return honest(self, n)
    BlockAllocator.allocate, BlockAllocator.patched = allocate, True
    if LIE:
        free, used = BlockAllocator.num_free.fget, BlockAllocator.num_used.fget
        BlockAllocator.num_free = property(lambda self: free(self) + len(_kept(self)))
        BlockAllocator.num_used = property(lambda self: used(self) - len(_kept(self)))


def run_request(decoder, pool, input_ids, **kwargs):
    _patch_allocator()
    release, PagedKVCache.release = PagedKVCache.release, _leak
    try:
        return _solution_run_request(decoder, pool, input_ids, **kwargs)
    finally:
        PagedKVCache.release = release
