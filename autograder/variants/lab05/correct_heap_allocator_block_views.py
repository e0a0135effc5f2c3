"""A correct solution written differently from the reference: a min-heap of free ids (the lowest
free id first, not a stack), a Counter that validates a whole call before anything changes, a cache
that keeps one table per layer's view and gathers with torch.cat of block slices, and a run loop
whose cache is released by contextlib.ExitStack."""
import contextlib
import heapq
from collections import Counter

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {}


class BlockAllocator:
    def __init__(self, num_blocks, block_size):
        self.num_blocks, self.block_size = num_blocks, block_size
        self._heap = list(range(num_blocks))        # already a heap
        self._users = Counter()
        self._most = 0

    @property
    def num_free(self):
        return len(self._heap)

    @property
    def num_used(self):
        return self.num_blocks - len(self._heap)

    @property
    def high_water(self):
        return self._most

    def allocate(self, n):
        if n > len(self._heap):
            raise OutOfBlocks(f"{n} blocks wanted, {len(self._heap)} of {self.num_blocks} free")
        got = [heapq.heappop(self._heap) for _ in range(n)]
        self._users.update(got)
        self._most = max(self._most, self.num_used)
        return got

    def _in_use(self, block_ids, extra):
        asked = Counter()
        for b in block_ids:
            if isinstance(b, bool) or not isinstance(b, int) or b < 0 or b >= self.num_blocks:
                raise ValueError(f"no block {b!r} in a pool of {self.num_blocks}")
            asked[b] += 1
            if self._users[b] < (asked[b] if extra else 1):
                raise ValueError(f"block {b} has {self._users[b]} user(s), asked to drop {asked[b]}")
        return asked

    def share(self, block_ids):
        self._users.update(self._in_use(block_ids, False))

    def free(self, block_ids):
        for b, times in self._in_use(block_ids, True).items():
            self._users[b] -= times
            if self._users[b] == 0:
                del self._users[b]
                heapq.heappush(self._heap, b)

    def refcount(self, block_id):
        return self._users[block_id]


class PagedKVCache:
    def __init__(self, pool):
        self.pool = pool
        self._ids = []
        self._n = [0] * pool.n_layer

    @property
    def length(self):
        return min(self._n)

    @property
    def block_table(self):
        return self._ids.copy()

    def bytes_allocated(self):
        return len(self._ids) * self.pool.block_bytes()

    def _room_for(self, tokens):
        short = -(-tokens // self.pool.block_size) - len(self._ids)
        if short > 0:
            self._ids = self._ids + self.pool.allocator.allocate(short)

    def reserve(self, n_tokens):
        self._room_for(max(self._n) + n_tokens)

    def append(self, layer, k, v):
        bs, start, t = self.pool.block_size, self._n[layer], k.shape[2]
        self._room_for(start + t)
        pos = start
        while pos < start + t:                       # block by block
            b, s = self._ids[pos // bs], pos % bs
            n = min(bs - s, start + t - pos)
            self.pool.k[layer, b, :, s:s + n] = k[0, :, pos - start:pos - start + n]
            self.pool.v[layer, b, :, s:s + n] = v[0, :, pos - start:pos - start + n]
            pos += n
        self._n[layer] = start + t
        return self.gather(layer)

    def gather(self, layer):
        T, bs = self._n[layer], self.pool.block_size
        H, D = self.pool.n_kv_heads, self.pool.head_dim
        if T == 0:
            empty = self.pool.k.new_zeros(1, H, 0, D)
            return empty, empty.clone()
        used = self._ids[:-(-T // bs)]
        k = torch.cat([self.pool.k[layer, b] for b in used], dim=1)[:, :T]   # (H, T, D)
        v = torch.cat([self.pool.v[layer, b] for b in used], dim=1)[:, :T]
        return k.unsqueeze(0), v.unsqueeze(0)

    def release(self):
        ids, self._ids, self._n = self._ids, [], [0] * self.pool.n_layer
        if ids:
            self.pool.allocator.free(ids)


def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None):
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be a positive integer, got {max_tokens!r}.")
    tokens = []

    def finish(reason, error=None):
        return {"tokens": tokens.copy(), "finish_reason": reason, "raw_output": to_text(tokens), "error": error}

    worst = input_ids.shape[1] + max_tokens - 1
    if -(-worst // pool.block_size) > pool.num_blocks:
        return finish(FinishReason.ERROR, f"{worst} tokens can never fit a pool of {pool.num_blocks} blocks")
    began = clock() if clock is not None else None
    with contextlib.ExitStack() as stack:
        cache = PagedKVCache(pool)
        stack.callback(cache.release)
        step = lambda: decoder.prefill(input_ids, kv=cache) if not tokens else \
            decoder.decode(torch.tensor([[tokens[-1]]]), cache)
        while True:
            if cancel is not None and cancel.is_set():
                return finish(FinishReason.CANCELLED)
            if deadline is not None and clock() - began >= deadline:
                return finish(FinishReason.TIMEOUT)
            try:
                last = step()[0][0, -1]
                if torch.isnan(last).any():
                    raise RuntimeError("NaN in the logits")
            except Exception as e:
                return finish(FinishReason.ERROR, f"{type(e).__name__}: {e}")
            tokens.append(int(last.argmax()))
            if content_filter is not None and content_filter(tokens[-1], to_text(tokens)):
                return finish(FinishReason.CONTENT_FILTER)
            if on_token is not None:
                on_token(tokens[-1])
            if tokens[-1] == eos_token_id:
                return finish(FinishReason.STOP)
            if len(tokens) >= max_tokens:
                return finish(FinishReason.LENGTH)
