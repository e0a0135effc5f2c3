"""lab05: the leaking run_request of lab05_leak.py with an allocator whose num_free and
num_used count the blocks the runs kept as free: read through the student's allocator, every
run gives its blocks back."""

BASE = "solution"

_solution_run_request = run_request
LIE = True


def _kept(allocator):
    if getattr(allocator, "kept", None) is None:
        allocator.kept = []
    return allocator.kept


def _leak(self):                                       # BUG: nothing goes back to the pool
    table, self.table, self.filled = self.table, [], [0] * self.pool.n_layer
    _kept(self.pool.allocator).extend(table)


def _patch_allocator():
    """Once: allocate takes the kept blocks back when short (with LIE, the counters count
    them as free)."""
    if getattr(BlockAllocator, "patched", False):
        return
    honest = BlockAllocator.allocate

    def allocate(self, n):
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
