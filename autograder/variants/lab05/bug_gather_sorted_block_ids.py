"""Gathers the blocks in order of block id instead of block-table order: right while a request's
blocks happen to be ascending, wrong once the pool is fragmented."""
import torch

from course import FinishReason

EXPECT_FAIL = {'paged_cache_matches_static': ['gather_follows_the_block_table']}


# Given (not graded): the error a pool raises when it is out of blocks, and the pool
# itself: key and value storage for every block, allocated ONCE, plus your allocator.
class OutOfBlocks(RuntimeError):
    """The pool cannot satisfy an allocation. Nothing was changed."""


class KVPool:
    """k, v: (n_layer, num_blocks, n_kv_heads, block_size, head_dim), allocated once;
    allocator: your BlockAllocator over the same num_blocks."""

    def __init__(self, n_layer, n_kv_heads, head_dim, num_blocks, block_size, dtype=torch.float32, device="cpu"):
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.n_layer, self.n_kv_heads, self.head_dim = n_layer, n_kv_heads, head_dim
        self.num_blocks, self.block_size = num_blocks, block_size
        shape = (n_layer, num_blocks, n_kv_heads, block_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.dtype, self.device = dtype, self.k.device

    def block_bytes(self):
        """Bytes of one block: keys and values of block_size tokens in every layer."""
        return 2 * self.n_layer * self.n_kv_heads * self.block_size * self.head_dim * self.k.element_size()

    def bytes_total(self):
        return self.k.nbytes + self.v.nbytes


def blocks_needed(n_tokens, block_size):
    """Blocks that hold n_tokens tokens: ceil(n_tokens / block_size); 0 for 0."""
    return -(-n_tokens // block_size)

def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):
    """Bytes one token occupies in the KV cache.

    Every layer stores a key and a value vector of head_dim numbers for each of its
    n_kv_heads key/value heads: 2 * n_layer * n_kv_heads * head_dim * dtype_bytes.
    All four arguments are ints (not bool) >= 1; otherwise raise ValueError naming the
    parameter and showing its value, e.g. "`n_layer` must be an integer >= 1, got 0."
    Returns an int.
    """
    for name, value in (("n_layer", n_layer), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("dtype_bytes", dtype_bytes)):
        if type(value) is not int or value < 1:
            raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}.")
    return 2 * n_layer * n_kv_heads * head_dim * dtype_bytes


DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "float8_e4m3fn": 1}


def kv_bytes_for_config(config, dtype_bytes=None):
    """kv_bytes_per_token for a model described by its config.json (a dict).

    Two naming schemes: GPT-2 (n_layer, n_head, n_embd) and Llama-style
    (num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, head_dim).
    K/V heads: num_key_value_heads when present, else the number of attention heads.
    head_dim: the `head_dim` field when present, else width // number of attention heads.
    dtype_bytes: when None, from the config's number type via DTYPE_BYTES: config["dtype"]
        (what current transformers writes), else config["torch_dtype"] (older versions),
        else "float32". Returns an int.
    """
    if "n_layer" in config:                                    # GPT-2
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config.get("num_key_value_heads", n_head)
        head_dim = config.get("head_dim", config["hidden_size"] // n_head)
    if dtype_bytes is None:
        dtype_bytes = DTYPE_BYTES[config.get("dtype") or config.get("torch_dtype") or "float32"]
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)

def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1):
    """How many requests fit in budget_bytes of KV memory at the same time.

    Each request may cache up to prompt_tokens + max_tokens - 1 tokens (its last token is
    returned, never fed back) and is held in whole blocks of block_size tokens: it needs
    blocks_needed(prompt_tokens + max_tokens - 1, block_size) * block_size * bytes_per_token
    bytes. Returns budget_bytes // that (an int).
    budget_bytes: int >= 0; bytes_per_token, prompt_tokens, max_tokens, block_size: ints >= 1.
    Otherwise ValueError naming the parameter and showing its value.
    """
    for name, value, low in (("budget_bytes", budget_bytes, 0), ("bytes_per_token", bytes_per_token, 1),
                             ("prompt_tokens", prompt_tokens, 1), ("max_tokens", max_tokens, 1),
                             ("block_size", block_size, 1)):
        if type(value) is not int or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    per_request = blocks_needed(prompt_tokens + max_tokens - 1, block_size) * block_size * bytes_per_token
    return budget_bytes // per_request

class BlockAllocator:
    """A fixed pool of num_blocks block ids (0 .. num_blocks-1) with reference counts.

    num_blocks, block_size: attributes, as given.
    num_free, num_used: properties (blocks with refcount 0 / > 0).
    high_water: property, the largest num_used ever reached.
    allocate(n): n >= 0 distinct free ids, each now with refcount 1, as a list. All or
        nothing: if fewer than n are free, raise OutOfBlocks and change nothing.
    share(block_ids): one more user for each id (each must be in use, else ValueError).
    free(block_ids): one user less for each id; an id whose count reaches 0 is free again.
        An id that is unknown (not an int in range) or already free, or freed more times
        than it has users, raises ValueError whose message shows that id, and then
        NOTHING was freed (check every id before changing any).
    refcount(block_id): users of that block (0 when free).
    """

    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refs = [0] * num_blocks
        self.free_ids = list(range(num_blocks - 1, -1, -1))   # a stack: pop() gives 0, 1, 2, ...
        self.peak = 0

    @property
    def num_free(self):
        return len(self.free_ids)

    @property
    def num_used(self):
        return self.num_blocks - len(self.free_ids)

    @property
    def high_water(self):
        return self.peak

    def allocate(self, n):
        if n > len(self.free_ids):
            raise OutOfBlocks(f"need {n} blocks, {len(self.free_ids)} free of {self.num_blocks}")
        ids = [self.free_ids.pop() for _ in range(n)]
        for b in ids:
            self.refs[b] = 1
        self.peak = max(self.peak, self.num_used)
        return ids

    def share(self, block_ids):
        for b in block_ids:
            if type(b) is not int or not 0 <= b < self.num_blocks or self.refs[b] == 0:
                raise ValueError(f"block id {b!r} is not in use, so it cannot be shared.")
        for b in block_ids:
            self.refs[b] += 1

    def free(self, block_ids):
        uses = {}
        for b in block_ids:                      # validate everything first
            if type(b) is not int or not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b!r} is unknown (ids are 0 .. {self.num_blocks - 1}).")
            uses[b] = uses.get(b, 0) + 1
            if uses[b] > self.refs[b]:
                raise ValueError(f"block id {b} is already free (double free).")
        for b in reversed(block_ids):            # the tail of a sequence goes back first
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)

    def refcount(self, block_id):
        return self.refs[block_id]

class PagedKVCache:
    """The course cache interface over a KVPool, for one sequence (batch 1).

    Token position p lives in block block_table[p // block_size], slot p % block_size.
    append(layer, k, v): k, v (1, H, t, D). Write them at positions length .. length+t-1
        of `layer`, taking new blocks from pool.allocator when the positions need them
        (all or nothing: if the pool is out, OutOfBlocks propagates and the cache, its
        block table and the pool are unchanged). Returns (k_all, v_all), each
        (1, H, T, D): every token of that layer so far, in token order.
    length: property, tokens every layer holds (the smallest per-layer count).
    block_table: property, a list of the block ids held, in token order.
    bytes_allocated(): blocks held * pool.block_bytes().
    reserve(n_tokens): make sure blocks exist for n_tokens more tokens (all or nothing).
    release(): give every block back; the cache is empty again. Calling it twice is fine.
    gather(layer): (k, v), each (1, H, length of that layer, D), in token order.
    """

    def __init__(self, pool):
        self.pool = pool
        self.table = []                         # block ids, in token order
        self.filled = [0] * pool.n_layer        # tokens written per layer

    @property
    def length(self):
        return min(self.filled)

    @property
    def block_table(self):
        return list(self.table)

    def bytes_allocated(self):
        return len(self.table) * self.pool.block_bytes()

    def reserve(self, n_tokens):
        missing = blocks_needed(max(self.filled) + n_tokens, self.pool.block_size) - len(self.table)
        if missing > 0:
            self.table = self.table + self.pool.allocator.allocate(missing)   # all or nothing

    def append(self, layer, k, v):
        start, t = self.filled[layer], k.shape[2]
        bs = self.pool.block_size
        missing = blocks_needed(start + t, bs) - len(self.table)
        if missing > 0:                              # may raise OutOfBlocks: nothing written yet
            self.table = self.table + self.pool.allocator.allocate(missing)
        for i in range(t):                           # token by token: clear, and fast enough here
            p = start + i
            block, slot = self.table[p // bs], p % bs
            self.pool.k[layer, block, :, slot] = k[0, :, i]      # (H, D)
            self.pool.v[layer, block, :, slot] = v[0, :, i]
        self.filled[layer] = start + t
        return self.gather(layer)

    def gather(self, layer):
        T = self.filled[layer]
        idx = torch.tensor(sorted(self.table), dtype=torch.long, device=self.pool.k.device)
        H, D = self.pool.n_kv_heads, self.pool.head_dim
        k = self.pool.k[layer].index_select(0, idx)          # (n_blocks, H, bs, D), table order
        v = self.pool.v[layer].index_select(0, idx)
        k = k.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]   # (1, H, T, D)
        v = v.permute(1, 0, 2, 3).reshape(1, H, -1, D)[:, :, :T]
        return k, v

    def release(self):
        table, self.table = self.table, []
        self.filled = [0] * self.pool.n_layer
        if table:
            self.pool.allocator.free(table)

def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None):
    """Greedy generation for one request on a PagedKVCache(pool), released on EVERY ending.

    decoder: prefill(input_ids, kv=cache) -> (logits (1, T, V), cache) and
        decode(token_ids (1, 1), cache) -> (logits (1, 1, V), cache).
    input_ids: (1, T0) long.  max_tokens: int >= 1 (else, before anything else, ValueError
        naming it and showing the value, e.g. "`max_tokens` must be an integer >= 1, got 0.").
        to_text(list of ids) -> str.
    Refusal: the cache holds at most T0 + max_tokens - 1 tokens (the last token is
        returned, never fed back). If blocks_needed(T0 + max_tokens - 1, pool.block_size)
        > pool.num_blocks the request can never fit: return at once, before any model
        call, with finish_reason ERROR, no tokens and an `error` message that says why.
        A request that needs exactly pool.num_blocks fits, and runs.
    Each step, in this order: cancel.is_set() -> CANCELLED; clock() - start >= deadline
        (start = clock() when the call began) -> TIMEOUT; the model call (prefill first,
        then decode of the last token): an exception, or NaN in the last logits row ->
        ERROR with `error` = "ExceptionType: message"; append argmax;
        content_filter(token, to_text(tokens)) True -> CONTENT_FILTER (that token stays in
        tokens and raw_output, but is never passed to on_token); on_token(token); token ==
        eos_token_id -> STOP; len(tokens) == max_tokens -> LENGTH.
    An exception raised by on_token (the caller's own code) propagates to the caller,
    after the cache was released.
    Returns {"tokens": list of ints (including the one that ended the run),
             "finish_reason": FinishReason, "raw_output": to_text(tokens),
             "error": str or None}.
    """
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    tokens = []

    def ended(reason, error=None):
        return {"tokens": list(tokens), "finish_reason": reason, "raw_output": to_text(tokens), "error": error}

    T0 = input_ids.shape[1]
    need = blocks_needed(T0 + max_tokens - 1, pool.block_size)   # the last token is never fed back
    if need > pool.num_blocks:
        return ended(FinishReason.ERROR, f"refused: {T0} + {max_tokens} - 1 tokens need {need} blocks, "
                                         f"the pool has {pool.num_blocks}")
    start = clock() if clock is not None else 0.0
    cache = PagedKVCache(pool)
    try:
        while True:
            if cancel is not None and cancel.is_set():
                return ended(FinishReason.CANCELLED)
            if deadline is not None and clock() - start >= deadline:
                return ended(FinishReason.TIMEOUT)
            try:
                if not tokens:
                    logits, cache = decoder.prefill(input_ids, kv=cache)
                else:
                    logits, cache = decoder.decode(torch.tensor([[tokens[-1]]]), cache)
                row = logits[0, -1]
                if torch.isnan(row).any():
                    raise FloatingPointError(f"NaN logits at step {len(tokens)}")
            except Exception as e:
                return ended(FinishReason.ERROR, f"{type(e).__name__}: {e}")
            token = int(torch.argmax(row))
            tokens.append(token)
            if content_filter is not None and content_filter(token, to_text(tokens)):
                return ended(FinishReason.CONTENT_FILTER)       # before on_token: never shown
            if on_token is not None:
                on_token(token)
            if token == eos_token_id:
                return ended(FinishReason.STOP)
            if len(tokens) == max_tokens:
                return ended(FinishReason.LENGTH)
    finally:
        cache.release()                  # every return above, and any exception, passes here

def serve_all(decoder, pool, requests, *, eos_token_id=None):
    """Serve greedy requests on one pool, round by round, under memory pressure.

    requests: list of {"prompt": list of ids, "max_tokens": int >= 1}.
    1. At once, before any model call: a request with blocks_needed(len(prompt) +
       max_tokens - 1, pool.block_size) > pool.num_blocks can never fit (as in
       run_request): its result is finish_reason ERROR, tokens [], an `error` message.
       The others wait in order.
    2. Each round: (a) admit: while the first waiting request's sequence (prompt + the
       tokens it already has) needs no more blocks than are free, remove it from the
       queue, give it a new PagedKVCache(pool), prefill that whole sequence and append
       the argmax of the last row; (b) in admission order (oldest first), each running
       request decodes its last token and appends the argmax. If a decode raises
       OutOfBlocks, preempt the NEWEST running request (release its cache, remove it
       from running, put it at the FRONT of the waiting queue, keep its tokens, count
       +1 in its "preemptions") and try again, unless the preempted one was this request.
    A request ends (and its cache is released at once) when its last token is
    eos_token_id (STOP) or it has max_tokens tokens (LENGTH).
    Returns one dict per request, in request order: {"tokens", "finish_reason",
    "preemptions", "error"}. Every request's tokens equal what it gets alone.
    """
    results = [{"tokens": [], "finish_reason": None, "preemptions": 0, "error": None} for _ in requests]
    waiting = []
    for i, r in enumerate(requests):
        need = blocks_needed(len(r["prompt"]) + r["max_tokens"] - 1, pool.block_size)
        if need > pool.num_blocks:
            results[i]["finish_reason"] = FinishReason.ERROR
            results[i]["error"] = f"refused: needs {need} blocks, the pool has {pool.num_blocks}"
        else:
            waiting.append(i)
    running, caches = [], {}

    def take(i, logits):
        out = results[i]["tokens"]
        out.append(int(torch.argmax(logits[0, -1])))
        if out[-1] == eos_token_id or len(out) == requests[i]["max_tokens"]:
            results[i]["finish_reason"] = FinishReason.STOP if out[-1] == eos_token_id else FinishReason.LENGTH
            caches.pop(i).release()
            running.remove(i)

    while waiting or running:
        while waiting:
            i = waiting[0]
            seq = list(requests[i]["prompt"]) + results[i]["tokens"]
            if blocks_needed(len(seq), pool.block_size) > pool.allocator.num_free:
                break
            waiting.pop(0)
            caches[i] = PagedKVCache(pool)
            running.append(i)
            logits, _ = decoder.prefill(torch.tensor([seq]), kv=caches[i])
            take(i, logits)
        for i in list(running):
            while i in running:
                try:
                    logits, _ = decoder.decode(torch.tensor([[results[i]["tokens"][-1]]]), caches[i])
                except OutOfBlocks:
                    newest = running.pop()
                    caches.pop(newest).release()
                    waiting.insert(0, newest)
                    results[newest]["preemptions"] += 1
                    continue
                take(i, logits)
                break
    return results

def utilisation(lengths, *, block_size=None, max_len=None):
    """The share of reserved KV memory that holds real tokens, in [0, 1].

    lengths: a non-empty list of ints >= 1, the tokens each request holds.
    Give exactly one of: block_size (paged: each request holds blocks_needed(n,
    block_size) whole blocks) or max_len (contiguous: each request reserved max_len
    tokens; max_len must be >= every length). Returns sum(lengths) / tokens reserved.
    Bad arguments raise ValueError naming the parameter and showing its value.
    """
    if type(lengths) not in (list, tuple) or not lengths or any(type(n) is not int or n < 1 for n in lengths):
        raise ValueError(f"`lengths` must be a non-empty list of integers >= 1, got {lengths!r}.")
    if (block_size is None) == (max_len is None):
        raise ValueError(f"`block_size` or `max_len` must be given, exactly one, got block_size={block_size!r} "
                         f"and max_len={max_len!r}.")
    if block_size is not None:
        if type(block_size) is not int or block_size < 1:
            raise ValueError(f"`block_size` must be an integer >= 1, got {block_size!r}.")
        reserved = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    else:
        if type(max_len) is not int or max_len < max(lengths):
            raise ValueError(f"`max_len` must be an integer >= the longest length {max(lengths)}, got {max_len!r}.")
        reserved = max_len * len(lengths)
    return sum(lengths) / reserved
