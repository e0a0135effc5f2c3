"""Paged KV memory: a block allocator and a paged cache over one preallocated pool. Defined in lab05.

    pool = KVPool.for_decoder(decoder, num_blocks=64, block_size=16)   # allocated once
    kv = PagedKVCache(pool)                        # a block table, no memory of its own
    logits, kv = decoder.prefill(ids, kv=kv)       # blocks taken from the pool on demand
    logits, kv = decoder.decode(next_ids, kv)
    kv.release()                                   # blocks back to the pool (idempotent)

A serving engine does not give every request a buffer of max_len tokens (most of it
would sit empty). It cuts one big pool into blocks of `block_size` tokens and gives a
request a block only when its tokens reach it; a block table maps the request's token
positions to blocks, as a page table maps virtual pages to frames (vLLM's
PagedAttention). The waste is at most one partly filled block per request.

Memory per token, keys and values of every layer, for MHA, GQA and MQA alike:

    kv_bytes_per_token = 2 * n_layer * n_kv_heads * head_dim * dtype_bytes

Only the key/value heads count: with grouped-query attention several query heads
share one K/V head, so n_kv_heads (config `num_key_value_heads`) can be far below
n_head (Llama-3-8B: 32 query heads, 8 K/V heads). Two kinds of model do not follow
it. With sliding-window attention (Mistral-7B v0.1: `sliding_window` 4096) a layer
attends only to the last 4096 positions, so a rolling-buffer cache stops growing
there: bytes per token * tokens is exact up to the window and an overestimate past
it. Multi-head latent attention (DeepSeek-V2/V3) caches, per token and layer, one
compressed latent vector (plus a small positional key) shared by all heads instead
of per-head keys and values, so its size follows the latent width, not the heads.

A request of P prompt tokens and max_tokens M caches at most P + M - 1 tokens: the
M-th token is returned and never fed back, so its key and value are never written.

The allocator (after nano-vllm's block manager) keeps a reference count per block, so
a prompt prefix held in FULL blocks can be shared by several requests and goes back
to the pool only when its last user frees it. Every operation validates all of its
arguments before it changes anything: a failed call leaves the pool as it was.

Pool layout: k, v of shape (n_layer, num_blocks, n_kv_heads, block_size, head_dim).
Batch size 1 per cache: one request, one block table.
"""
from __future__ import annotations

import torch

from ._checks import check_int, check_type, is_int

ANSWERS_FOR = "lab05"

__all__ = ["ANSWERS_FOR", "kv_bytes_per_token", "blocks_needed", "requests_that_fit", "OutOfBlocks",
           "BlockAllocator", "KVPool", "PagedKVCache"]


# ---------------------------------------------------------------- the formula

def kv_bytes_per_token(n_layer: int, n_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one token occupies in the cache: 2 (key and value) * n_layer * n_kv_heads * head_dim * dtype_bytes."""
    for name, value in (("n_layer", n_layer), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("dtype_bytes", dtype_bytes)):
        check_int(name, value, 1)
    return 2 * n_layer * n_kv_heads * head_dim * dtype_bytes


def blocks_needed(n_tokens: int, block_size: int) -> int:
    """Blocks that hold n_tokens tokens: ceil(n_tokens / block_size); 0 for 0 tokens."""
    check_int("n_tokens", n_tokens, 0)
    check_int("block_size", block_size, 1)
    return -(-n_tokens // block_size)


def requests_that_fit(budget_bytes: int, bytes_per_token: int, prompt_tokens: int, max_tokens: int,
                      block_size: int = 1) -> int:
    """How many requests fit in budget_bytes at once, each reserving its worst case in
    whole blocks of block_size tokens. The worst case is prompt_tokens + max_tokens - 1
    cached tokens: the last token is returned to the caller and never fed back, so its
    key and value are never written (the refusal rule of lab05 and lab07)."""
    check_int("budget_bytes", budget_bytes, 0)
    check_int("bytes_per_token", bytes_per_token, 1)
    check_int("prompt_tokens", prompt_tokens, 1)
    check_int("max_tokens", max_tokens, 1)
    check_int("block_size", block_size, 1)
    per_request = blocks_needed(prompt_tokens + max_tokens - 1, block_size) * block_size * bytes_per_token
    return budget_bytes // per_request


# ---------------------------------------------------------------- the allocator

class OutOfBlocks(RuntimeError):
    """The pool cannot satisfy an allocation. Nothing was changed."""

    def __init__(self, needed: int, free: int, total: int) -> None:
        self.needed, self.free, self.total = needed, free, total
        super().__init__(f"out of KV blocks: need {needed}, {free} free of {total}.")


class BlockAllocator:
    """A fixed pool of `num_blocks` block ids with reference counts.

    allocate(n)  -> n ids, each with refcount 1; all or nothing (OutOfBlocks)
    share(ids)   each id gets one more user (it must be in use)
    free(ids)    each id loses one user; at 0 it returns to the free list
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = check_int("num_blocks", num_blocks, 1)
        self.block_size = check_int("block_size", block_size, 1)
        self._refs = [0] * num_blocks
        # A stack: allocate pops from the end. Freeing pushes a table's ids in reverse
        # order, so the same ids come back in the same order next time.
        self._free = list(range(num_blocks - 1, -1, -1))
        self._high_water = 0

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    @property
    def high_water(self) -> int:
        """The most blocks ever in use at once."""
        return self._high_water

    def allocate(self, n: int) -> list[int]:
        """Take n free blocks (refcount 1 each). Raise OutOfBlocks, changing nothing, if fewer are free."""
        check_int("n", n, 0)
        if n > len(self._free):
            raise OutOfBlocks(n, len(self._free), self.num_blocks)
        ids = [self._free.pop() for _ in range(n)]
        for b in ids:
            self._refs[b] = 1
        self._high_water = max(self._high_water, self.num_used)
        return ids

    def _check_ids(self, name: str, block_ids, uses: bool) -> list[int]:
        """Validate every id before anything changes; with uses=True, also that no id
        is freed more times than it has users."""
        if not isinstance(block_ids, (list, tuple)):
            raise ValueError(f"`{name}` must be a list of block ids, got {type(block_ids).__name__}.")
        ids = list(block_ids)
        count: dict[int, int] = {}
        for b in ids:
            if not is_int(b) or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown: ids are integers in [0, {self.num_blocks}).")
            count[b] = count.get(b, 0) + 1
            if self._refs[b] == 0:
                raise ValueError(f"block id {b} is not allocated (already free).")
            if uses and count[b] > self._refs[b]:
                raise ValueError(f"block id {b} is freed {count[b]} times but has {self._refs[b]} user(s).")
        return ids

    def share(self, block_ids) -> None:
        """One more user for each block (a second request reusing a full prefix block)."""
        for b in self._check_ids("block_ids", block_ids, uses=False):
            self._refs[b] += 1

    def free(self, block_ids) -> None:
        """One user less for each block; a block whose count reaches 0 returns to the
        free list. Frees in reverse order (the tail of a sequence first). An unknown or
        already free id raises ValueError naming it, and then nothing was freed."""
        for b in reversed(self._check_ids("block_ids", block_ids, uses=True)):
            self._refs[b] -= 1
            if self._refs[b] == 0:
                self._free.append(b)

    def refcount(self, block_id: int) -> int:
        """Users of block_id; 0 when it is free."""
        check_int("block_id", block_id, 0, self.num_blocks - 1)
        return self._refs[block_id]

    def __repr__(self) -> str:
        return (f"BlockAllocator(num_blocks={self.num_blocks}, block_size={self.block_size}, "
                f"used={self.num_used}, high_water={self.high_water})")


# ---------------------------------------------------------------- the pool

class KVPool:
    """Key and value storage for num_blocks blocks, allocated once, plus its allocator.

    k, v: (n_layer, num_blocks, n_kv_heads, block_size, head_dim) on `device`.
    """

    def __init__(self, n_layer: int, n_kv_heads: int, head_dim: int, num_blocks: int, block_size: int,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        for name, value in (("n_layer", n_layer), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
            check_int(name, value, 1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"`dtype` must be a floating torch.dtype, got {dtype!r}.")
        check_type("device", device, (str, torch.device), "a str or a torch.device")
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.n_layer, self.n_kv_heads, self.head_dim = n_layer, n_kv_heads, head_dim
        self.num_blocks, self.block_size = num_blocks, block_size
        self.dtype, self.device = dtype, torch.device(device)
        shape = (n_layer, num_blocks, n_kv_heads, block_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=self.device)
        self.v = torch.zeros(shape, dtype=dtype, device=self.device)
        self.device = self.k.device          # "cuda" -> "cuda:0"

    @classmethod
    def for_decoder(cls, decoder, num_blocks: int, block_size: int) -> "KVPool":
        """A pool shaped for a course.decoder.CourseDecoder, on its device and dtype."""
        cfg = getattr(decoder, "config", None)
        if cfg is None or not hasattr(cfg, "head_dim") or not hasattr(decoder, "wte"):
            raise ValueError(f"`decoder` must be a CourseDecoder, got {type(decoder).__name__}.")
        return cls(cfg.n_layer, cfg.n_head, cfg.head_dim, num_blocks, block_size,
                   dtype=decoder.wte.weight.dtype, device=decoder.device)

    def bytes_per_token(self) -> int:
        return kv_bytes_per_token(self.n_layer, self.n_kv_heads, self.head_dim, self.k.element_size())

    def block_bytes(self) -> int:
        """Bytes of one block: keys and values of block_size tokens in every layer."""
        return self.block_size * self.bytes_per_token()

    def bytes_total(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def cache_factory(self):
        """A CourseDecoder cache_factory: each spec gets a new PagedKVCache on this pool."""
        def factory(spec) -> PagedKVCache:
            want = (spec.n_layer, spec.n_head, spec.head_dim, spec.dtype, spec.device.type)
            have = (self.n_layer, self.n_kv_heads, self.head_dim, self.dtype, self.device.type)
            if want != have:
                raise ValueError(f"`spec` must match the pool (n_layer, n_kv_heads, head_dim, dtype, device) = "
                                 f"{have}, got {want}.")
            if spec.batch != 1:
                raise ValueError(f"`batch` must be 1 for a PagedKVCache (one block table), got {spec.batch}.")
            return PagedKVCache(self)
        return factory

    def __repr__(self) -> str:
        return (f"KVPool(n_layer={self.n_layer}, n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, "
                f"num_blocks={self.num_blocks}, block_size={self.block_size}, dtype={self.dtype}, "
                f"device={self.device}, free={self.allocator.num_free})")


# ---------------------------------------------------------------- the paged cache

class PagedKVCache:
    """The course cache interface (see course/kv_cache.py) over a KVPool, batch 1.

    Token position p of this sequence lives in block block_table[p // block_size],
    slot p % block_size. Blocks are taken when the first layer's tokens need them
    and returned by release(). An append the pool cannot serve raises OutOfBlocks
    and leaves the cache as it was.

    filled: tokens written per layer (a list). course.batched writes several caches
    in one forward straight into the pool, after reserve(), and advances it.
    """

    def __init__(self, pool: KVPool) -> None:
        check_type("pool", pool, KVPool, "a KVPool")
        self.pool = pool
        self._table: list[int] = []
        self._runs: list[tuple[int, int]] = []
        self.filled = [0] * pool.n_layer               # tokens written per layer

    # -- the interface the decoder uses

    @property
    def length(self) -> int:
        """Tokens every layer holds (mid-forward, the last layers lag behind)."""
        return min(self.filled)

    @property
    def block_table(self) -> list[int]:
        return list(self._table)

    def bytes_allocated(self) -> int:
        """Bytes of the blocks this cache holds (whole blocks, however full)."""
        return len(self._table) * self.pool.block_bytes()

    def reserve(self, n_tokens: int) -> None:
        """Make sure blocks exist for n_tokens more tokens; all or nothing (OutOfBlocks)."""
        check_int("n_tokens", n_tokens, 0)
        self._grow_to(max(self.filled) + n_tokens)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the t new tokens' k, v (1, H, t, D) at `layer`; return (1, H, T, D) all of them."""
        self._check_append(layer, k, v)
        start, t = self.filled[layer], k.shape[2]
        bs = self.pool.block_size
        if start + t > len(self._table) * bs:
            self._grow_to(start + t)                   # may raise OutOfBlocks: nothing written yet
        pk, pv = self.pool.k[layer], self.pool.v[layer]   # (N, H, bs, D)
        done = 0
        while done < t:                                # one copy per block the new tokens touch
            pos = start + done
            block, slot = self._table[pos // bs], pos % bs
            n = min(bs - slot, t - done)
            pk[block].narrow(1, slot, n).copy_(k[0].narrow(1, done, n))     # (H, n, D)
            pv[block].narrow(1, slot, n).copy_(v[0].narrow(1, done, n))
            done += n
        self.filled[layer] = start + t
        return self._gather(pk, start + t), self._gather(pv, start + t)

    def gather(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of `layer`, (1, H, T, D) in token order (a copy)."""
        self._check_layer(layer)
        T = self.filled[layer]
        return self._gather(self.pool.k[layer], T), self._gather(self.pool.v[layer], T)

    def release(self) -> None:
        """Return every block to the pool; the cache is empty (and reusable). Idempotent."""
        table = self._table
        self._set_table([])
        self.filled = [0] * self.pool.n_layer
        if table:
            self.pool.allocator.free(table)

    # -- prefix sharing

    def share_prefix(self, source: "PagedKVCache", n_tokens: int) -> None:
        """Start this empty cache with the first n_tokens of `source` by sharing its
        blocks (refcount + 1) instead of copying them. n_tokens must fill whole blocks:
        a partly filled block would be written by both sequences."""
        check_type("source", source, PagedKVCache, "a PagedKVCache")
        if source.pool is not self.pool:
            raise ValueError("`source` must use the same KVPool as this cache.")
        if self._table or max(self.filled):
            raise ValueError(f"the cache must be empty to share a prefix, got one holding {self.length} tokens.")
        check_int("n_tokens", n_tokens, 0, source.length)
        if n_tokens % self.pool.block_size:
            raise ValueError(f"`n_tokens` must be a multiple of block_size={self.pool.block_size}, got {n_tokens}.")
        shared = source._table[: n_tokens // self.pool.block_size]
        self.pool.allocator.share(shared)
        self._set_table(list(shared))
        self.filled = [n_tokens] * self.pool.n_layer

    # -- helpers

    def _grow_to(self, n_tokens: int) -> None:
        missing = blocks_needed(n_tokens, self.pool.block_size) - len(self._table)
        if missing > 0:
            self._set_table(self._table + self.pool.allocator.allocate(missing))

    def _set_table(self, table: list[int]) -> None:
        self._table = table
        # The table as runs of consecutive ids, [(first, count), ...]: a fresh pool hands
        # out consecutive ids, so gather usually copies one slice instead of many blocks.
        runs: list[list[int]] = []
        for b in table:
            if runs and runs[-1][0] + runs[-1][1] == b:
                runs[-1][1] += 1
            else:
                runs.append([b, 1])
        self._runs = [(first, count) for first, count in runs]

    def _gather(self, buf: torch.Tensor, T: int) -> torch.Tensor:
        # buf (N, H, bs, D). Each run is a view (H, n, bs, D); one cat copies them, in
        # table order, into a new contiguous (H, nb, bs, D) whose tokens then lie in a
        # row: a free view (1, H, nb * bs, D), cut to the T tokens written.
        H, D = self.pool.n_kv_heads, self.pool.head_dim
        if not self._table:
            return buf.new_zeros(1, H, 0, D)
        if len(self._runs) == 1:                                           # the usual case: one copy
            first, count = self._runs[0]
            blocks = buf[first:first + count].transpose(0, 1).contiguous()   # (H, nb, bs, D)
        else:
            blocks = torch.cat([buf[first:first + count].transpose(0, 1) for first, count in self._runs], dim=1)
        return blocks.view(1, H, -1, D)[:, :, :T]                          # (1, H, T, D)

    def _check_layer(self, layer) -> None:
        if not is_int(layer) or not 0 <= layer < self.pool.n_layer:
            raise ValueError(f"`layer` must be an integer in [0, {self.pool.n_layer}), got {layer!r}.")

    def _check_append(self, layer, k, v) -> None:
        self._check_layer(layer)
        p = self.pool
        for name, x in (("k", k), ("v", v)):
            if not isinstance(x, torch.Tensor) or x.dim() != 4:
                got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(f"`{name}` must be a 4-D tensor (1, H, t, D), got {got}.")
            B, H, t, D = x.shape
            if B != 1 or H != p.n_kv_heads or D != p.head_dim or t < 1:
                raise ValueError(f"`{name}` must be (1, H, t, D) = (1, {p.n_kv_heads}, t >= 1, {p.head_dim}), "
                                 f"got {tuple(x.shape)}.")
            if x.dtype != p.dtype or x.device.type != p.device.type:
                raise ValueError(f"`{name}` must be {p.dtype} on {p.device} like the pool, "
                                 f"got {x.dtype} on {x.device}.")
        if k.shape != v.shape:
            raise ValueError(f"`v` must have the shape of `k` {tuple(k.shape)}, got {tuple(v.shape)}.")

    def __repr__(self) -> str:
        return f"PagedKVCache(length={self.length}, blocks={self._table})"
