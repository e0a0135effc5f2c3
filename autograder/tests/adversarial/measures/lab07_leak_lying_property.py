"""lab07: the late release of lab07_leak.py, with the course allocator's num_free and num_used
properties replaced so that they count the blocks not yet released as free."""

BASE = "solution"

from course.paged_kv import BlockAllocator

LIE = True
_KEPT = []                                             # caches of finished requests, not released yet
_LYING = []
_solution_finish = finish
_solution_schedule = schedule


def _lie():
    """With LIE: the course allocator's num_free and num_used (properties, not callables)
    count the kept blocks as free, from the first step on."""
    if LIE and not _LYING:
        free, used = BlockAllocator.num_free.fget, BlockAllocator.num_used.fget
        BlockAllocator.num_free = property(lambda self: free(self) + sum(len(c.block_table) for c in _KEPT))
        BlockAllocator.num_used = property(lambda self: used(self) - sum(len(c.block_table) for c in _KEPT))
        _LYING.append(True)


def finish(engine, req, reason, now, **kwargs):
    if req.cache is not None:                          # BUG: released at the next schedule, not now
        _KEPT.append(req.cache)
        req.cache = None
    return _solution_finish(engine, req, reason, now, **kwargs)


def schedule(engine):
    _lie()
    while _KEPT:
        _KEPT.pop().release()
    return _solution_schedule(engine)
