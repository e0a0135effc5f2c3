"""A correct solution written differently: a set of free ids (lowest id first), a per-token
slot map with advanced indexing, a context manager that releases, a deque scheduler."""
import math
from collections import deque

import torch

from course import FinishReason

EXPECT_FAIL = {}


class OutOfBlocks(RuntimeError):
    """The pool cannot satisfy an allocation. Nothing was changed."""


class KVPool:
    def __init__(self, n_layer, n_kv_heads, head_dim, num_blocks, block_size, dtype=torch.float32, device="cpu"):
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.n_layer, self.n_kv_heads, self.head_dim = n_layer, n_kv_heads, head_dim
        self.num_blocks, self.block_size = num_blocks, block_size
        shape = (n_layer, num_blocks, n_kv_heads, block_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.dtype, self.device = dtype, self.k.device

    def block_bytes(self):
        return 2 * self.n_layer * self.n_kv_heads * self.block_size * self.head_dim * self.k.element_size()

    def bytes_total(self):
        return self.k.nbytes + self.v.nbytes


def blocks_needed(n_tokens, block_size):
    return math.ceil(n_tokens / block_size)


def _positive(**named):
    for name, value in named.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")


def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):
    _positive(n_layer=n_layer, n_kv_heads=n_kv_heads, head_dim=head_dim, dtype_bytes=dtype_bytes)
    return math.prod((2, n_layer, n_kv_heads, head_dim, dtype_bytes))


def kv_bytes_for_config(config, dtype_bytes=None):
    def first(*keys, default=None):
        return next((config[k] for k in keys if config.get(k) is not None), default)
    layers = first("num_hidden_layers", "n_layer")
    heads = first("num_attention_heads", "n_head")
    kv_heads = first("num_key_value_heads", default=heads)
    head_dim = first("head_dim", default=first("hidden_size", "n_embd") // heads)
    if dtype_bytes is None:
        dtype_bytes = torch.empty((), dtype=getattr(torch, first("dtype", "torch_dtype", default="float32"))).element_size()
    return kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)


def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1):
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
        raise ValueError(f"`budget_bytes` must be a non-negative integer, got {budget_bytes!r}.")
    _positive(bytes_per_token=bytes_per_token, prompt_tokens=prompt_tokens, max_tokens=max_tokens,
              block_size=block_size)
    tokens = math.ceil((prompt_tokens + max_tokens - 1) / block_size) * block_size   # the last token is never cached
    return budget_bytes // (tokens * bytes_per_token)


class BlockAllocator:
    def __init__(self, num_blocks, block_size):
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free = set(range(num_blocks))
        self._users = {}
        self._peak = 0

    num_free = property(lambda self: len(self._free))
    num_used = property(lambda self: len(self._users))
    high_water = property(lambda self: self._peak)

    def allocate(self, n):
        if n > len(self._free):
            raise OutOfBlocks(f"{n} blocks requested, only {len(self._free)} free")
        ids = sorted(self._free)[:n]            # lowest ids first
        self._free.difference_update(ids)
        self._users.update(dict.fromkeys(ids, 1))
        self._peak = max(self._peak, len(self._users))
        return ids

    def _validate(self, block_ids, extra_uses):
        counts = {}
        for b in block_ids:
            if b not in self._users:
                raise ValueError(f"cannot use block {b!r}: it is not allocated")
            counts[b] = counts.get(b, 0) + 1
            if extra_uses and counts[b] > self._users[b]:
                raise ValueError(f"block {b} would be freed more often than it is used")

    def share(self, block_ids):
        self._validate(block_ids, False)
        for b in block_ids:
            self._users[b] += 1

    def free(self, block_ids):
        self._validate(block_ids, True)
        for b in block_ids:
            self._users[b] -= 1
            if not self._users[b]:
                del self._users[b]
                self._free.add(b)

    def refcount(self, block_id):
        return self._users.get(block_id, 0)


class PagedKVCache:
    def __init__(self, pool):
        self.pool = pool
        self._blocks = []
        self._count = [0] * pool.n_layer

    length = property(lambda self: min(self._count))
    block_table = property(lambda self: self._blocks[:])

    def bytes_allocated(self):
        return self.pool.block_bytes() * len(self._blocks)

    def _ensure(self, tokens):
        short = blocks_needed(tokens, self.pool.block_size) - len(self._blocks)
        if short > 0:
            self._blocks += self.pool.allocator.allocate(short)

    def reserve(self, n_tokens):
        self._ensure(max(self._count) + n_tokens)

    def _slots(self, start, stop):
        pos = torch.arange(start, stop, device=self.pool.k.device)
        table = torch.tensor(self._blocks, dtype=torch.long, device=self.pool.k.device)
        return table[pos // self.pool.block_size], pos % self.pool.block_size

    def append(self, layer, k, v):
        first = self._count[layer]
        self._ensure(first + k.shape[2])
        blocks, slots = self._slots(first, first + k.shape[2])
        self.pool.k[layer][blocks, :, slots] = k[0].transpose(0, 1)      # (t, H, D)
        self.pool.v[layer][blocks, :, slots] = v[0].transpose(0, 1)
        self._count[layer] += k.shape[2]
        return self.gather(layer)

    def gather(self, layer):
        blocks, slots = self._slots(0, self._count[layer])
        k = self.pool.k[layer][blocks, :, slots].transpose(0, 1)[None]    # (1, H, T, D)
        v = self.pool.v[layer][blocks, :, slots].transpose(0, 1)[None]
        return k, v

    def release(self):
        blocks, self._blocks, self._count = self._blocks, [], [0] * self.pool.n_layer
        self.pool.allocator.free(blocks)


class _Borrowed:
    """with _Borrowed(pool) as cache: ... releases the cache however the block is left."""

    def __init__(self, pool):
        self.cache = PagedKVCache(pool)

    def __enter__(self):
        return self.cache

    def __exit__(self, *exc):
        self.cache.release()
        return False


def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None):
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be a positive integer, got {max_tokens!r}.")
    tokens = []

    def out(reason, error=None):
        return dict(tokens=tokens[:], finish_reason=reason, raw_output=to_text(tokens), error=error)

    if blocks_needed(input_ids.shape[1] + max_tokens - 1, pool.block_size) > pool.num_blocks:
        return out(FinishReason.ERROR, "refused: larger than the whole KV pool")
    t0 = clock() if deadline is not None else None
    with _Borrowed(pool) as cache:
        while len(tokens) < max_tokens:
            if cancel is not None and cancel.is_set():
                return out(FinishReason.CANCELLED)
            if deadline is not None and clock() - t0 >= deadline:
                return out(FinishReason.TIMEOUT)
            try:
                step = decoder.decode(torch.tensor([tokens[-1:]]), cache) if tokens else \
                    decoder.prefill(input_ids, kv=cache)
                last = step[0][0, -1]
                if bool(last.isnan().any()):
                    raise ValueError("the logits are NaN")
            except Exception as e:
                return out(FinishReason.ERROR, f"{type(e).__name__}: {e}")
            tokens.append(int(last.argmax()))
            if content_filter and content_filter(tokens[-1], to_text(tokens)):
                return out(FinishReason.CONTENT_FILTER)
            if on_token:
                on_token(tokens[-1])
            if tokens[-1] == eos_token_id:
                return out(FinishReason.STOP)
        return out(FinishReason.LENGTH)


def serve_all(decoder, pool, requests, *, eos_token_id=None):
    state = [dict(tokens=[], finish_reason=None, preemptions=0, error=None) for _ in requests]
    queue, running, cache = deque(), [], {}
    for i, r in enumerate(requests):
        if blocks_needed(len(r["prompt"]) + r["max_tokens"] - 1, pool.block_size) > pool.num_blocks:
            state[i].update(finish_reason=FinishReason.ERROR, error="refused: larger than the whole KV pool")
        else:
            queue.append(i)

    def record(i, logits):
        state[i]["tokens"].append(int(logits[0, -1].argmax()))
        last, n = state[i]["tokens"][-1], len(state[i]["tokens"])
        if last == eos_token_id or n == requests[i]["max_tokens"]:
            state[i]["finish_reason"] = FinishReason.STOP if last == eos_token_id else FinishReason.LENGTH
            running.remove(i)
            cache.pop(i).release()

    while queue or running:
        while queue and blocks_needed(len(requests[queue[0]]["prompt"]) + len(state[queue[0]]["tokens"]),
                                      pool.block_size) <= pool.allocator.num_free:
            i = queue.popleft()
            running.append(i)
            cache[i] = PagedKVCache(pool)
            record(i, decoder.prefill(torch.tensor([requests[i]["prompt"] + state[i]["tokens"]]), kv=cache[i])[0])
        for i in running[:]:
            while i in running:
                try:
                    logits = decoder.decode(torch.tensor([[state[i]["tokens"][-1]]]), cache[i])[0]
                except OutOfBlocks:
                    victim = running.pop()
                    cache.pop(victim).release()
                    queue.appendleft(victim)
                    state[victim]["preemptions"] += 1
                else:
                    record(i, logits)
                    break
    return state


def utilisation(lengths, *, block_size=None, max_len=None):
    if not isinstance(lengths, (list, tuple)) or len(lengths) == 0 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths):
        raise ValueError(f"`lengths` must be a non-empty list of positive integers, got {lengths!r}.")
    if (block_size is None) is (max_len is None):
        raise ValueError(f"exactly one of `block_size` and `max_len`, got block_size={block_size!r}, "
                         f"max_len={max_len!r}.")
    if max_len is not None:
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < max(lengths):
            raise ValueError(f"`max_len` must cover the longest request, got {max_len!r}.")
        return sum(lengths) / (max_len * len(lengths))
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"`block_size` must be a positive integer, got {block_size!r}.")
    return sum(lengths) / sum(math.ceil(n / block_size) * block_size for n in lengths)
