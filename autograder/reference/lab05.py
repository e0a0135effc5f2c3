"""Reference for lab05 (the KV cache in memory): the judges' expected values.

The formula, the allocator, the pool and the paged cache are course.paged_kv itself
(one implementation); this file adds what only the lab asks for: reading a
config.json, the request runner that releases on every ending, the scheduler under
memory pressure, and utilisation.

Decoder call shapes (course.decoder.CourseDecoder and the graders' toy):
    decoder.prefill(input_ids (1, T), kv=cache) -> (logits (1, T, V), cache)
    decoder.decode(token_ids (1, 1), cache)     -> (logits (1, 1, V), cache)
"""
from __future__ import annotations

from collections import deque

import torch

from course import FinishReason
from course.paged_kv import (BlockAllocator, KVPool, OutOfBlocks, PagedKVCache, blocks_needed,  # noqa: F401
                             kv_bytes_per_token, requests_that_fit)

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "float8_e4m3fn": 1}


def kv_bytes_for_config(config: dict, dtype_bytes: int | None = None) -> int:
    if not isinstance(config, dict):
        raise ValueError(f"`config` must be a dict (a parsed config.json), got {type(config).__name__}.")
    if "n_layer" in config:                                   # GPT-2 names
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config.get("num_key_value_heads") or n_head
        head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    if dtype_bytes is None:
        # Current transformers writes `dtype`; configs saved by older versions say `torch_dtype`.
        key = "dtype" if config.get("dtype") is not None else "torch_dtype"
        name = config.get(key) or "float32"
        if name not in DTYPE_BYTES:
            raise ValueError(f"`{key}` must be one of {', '.join(DTYPE_BYTES)}, got {name!r}.")
        dtype_bytes = DTYPE_BYTES[name]
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)


# ---------------------------------------------------------------- one request

def _check_ids(input_ids) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1 \
            or input_ids.shape[1] < 1:
        got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"`input_ids` must be a (1, T) tensor of token ids, got {got}.")


def run_request(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None,
                clock=None, deadline=None, content_filter=None, on_token=None) -> dict:
    _check_ids(input_ids)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")
    tokens: list[int] = []

    def result(reason, error=None):
        return {"tokens": list(tokens), "finish_reason": reason, "raw_output": to_text(tokens), "error": error}

    longest = input_ids.shape[1] + max_tokens - 1        # the last token is returned, never fed back
    need = blocks_needed(longest, pool.block_size)
    if need > pool.num_blocks:
        return result(FinishReason.ERROR, f"refused: {input_ids.shape[1]} + {max_tokens} - 1 = {longest} tokens "
                                          f"need {need} blocks and the pool has {pool.num_blocks}")
    start = clock() if clock is not None else 0.0
    cache = PagedKVCache(pool)
    try:
        while True:
            if cancel is not None and cancel.is_set():
                return result(FinishReason.CANCELLED)
            if deadline is not None and clock() - start >= deadline:
                return result(FinishReason.TIMEOUT)
            try:
                if not tokens:
                    logits, cache = decoder.prefill(input_ids, kv=cache)
                else:
                    logits, cache = decoder.decode(torch.tensor([[tokens[-1]]]), cache)
                row = logits[0, -1]
                if torch.isnan(row).any():
                    raise FloatingPointError(f"NaN logits at step {len(tokens)}")
            except Exception as e:
                return result(FinishReason.ERROR, f"{type(e).__name__}: {e}")
            token = int(torch.argmax(row))
            tokens.append(token)                      # kept in the raw output, as in lab03
            if content_filter is not None and content_filter(token, to_text(tokens)):
                return result(FinishReason.CONTENT_FILTER)   # never shown: on_token does not see it
            if on_token is not None:
                on_token(token)                       # the caller's exception propagates (after finally)
            if token == eos_token_id:
                return result(FinishReason.STOP)
            if len(tokens) == max_tokens:
                return result(FinishReason.LENGTH)
    finally:
        cache.release()


# ---------------------------------------------------------------- many requests, one pool

def serve_all(decoder, pool, requests, *, eos_token_id=None) -> list[dict]:
    n = len(requests)
    results = [{"tokens": [], "finish_reason": None, "preemptions": 0, "error": None} for _ in range(n)]
    waiting: deque[int] = deque()
    for i, r in enumerate(requests):
        need = blocks_needed(len(r["prompt"]) + r["max_tokens"] - 1, pool.block_size)
        if need > pool.num_blocks:
            results[i].update(finish_reason=FinishReason.ERROR,
                              error=f"refused: needs {need} blocks, the pool has {pool.num_blocks}")
        else:
            waiting.append(i)
    running: list[int] = []
    caches: dict[int, PagedKVCache] = {}

    def done(i):
        out = results[i]["tokens"]
        if out and out[-1] == eos_token_id:
            return FinishReason.STOP
        if len(out) == requests[i]["max_tokens"]:
            return FinishReason.LENGTH
        return None

    def take(i, logits):
        results[i]["tokens"].append(int(torch.argmax(logits[0, -1])))
        reason = done(i)
        if reason is not None:
            results[i]["finish_reason"] = reason
            caches.pop(i).release()
            running.remove(i)

    def preempt(i):
        caches.pop(i).release()
        running.remove(i)
        waiting.appendleft(i)
        results[i]["preemptions"] += 1

    while waiting or running:
        while waiting:                                        # admit, first come first served
            i = waiting[0]
            seq = list(requests[i]["prompt"]) + results[i]["tokens"]
            if blocks_needed(len(seq), pool.block_size) > pool.allocator.num_free:
                break
            waiting.popleft()
            caches[i] = PagedKVCache(pool)
            running.append(i)
            logits, _ = decoder.prefill(torch.tensor([seq]), kv=caches[i])
            take(i, logits)
        for i in list(running):                               # one decode step each, oldest first
            while i in running:
                try:
                    logits, _ = decoder.decode(torch.tensor([[results[i]["tokens"][-1]]]), caches[i])
                except OutOfBlocks:
                    preempt(running[-1])                      # the newest gives its blocks back
                    continue
                take(i, logits)
                break
    return results


# ---------------------------------------------------------------- waste

def utilisation(lengths, *, block_size=None, max_len=None) -> float:
    if not isinstance(lengths, (list, tuple)) or not lengths or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"`lengths` must be a non-empty list of integers >= 1, got {lengths!r}.")
    if (block_size is None) == (max_len is None):
        raise ValueError(f"`block_size` or `max_len` must be given (exactly one), got block_size={block_size!r}, "
                         f"max_len={max_len!r}.")
    if block_size is not None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"`block_size` must be an integer >= 1, got {block_size!r}.")
        reserved = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    else:
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < max(lengths):
            raise ValueError(f"`max_len` must be an integer >= the longest length {max(lengths)}, got {max_len!r}.")
        reserved = max_len * len(lengths)
    return sum(lengths) / reserved


def solo_tokens(decoder, prompt, max_tokens, eos_token_id=None, pool_blocks=64, block_size=4) -> list[int]:
    """A request alone on a fresh pool: what any schedule must reproduce."""
    pool = KVPool(decoder.n_layer, decoder.n_head, decoder.head_dim, pool_blocks, block_size)
    res = run_request(decoder, pool, torch.tensor([list(prompt)]), max_tokens=max_tokens, to_text=str,
                      eos_token_id=eos_token_id)
    return res["tokens"]


__all__ = ["DTYPE_BYTES", "kv_bytes_per_token", "kv_bytes_for_config", "requests_that_fit", "blocks_needed",
           "OutOfBlocks", "BlockAllocator", "KVPool", "PagedKVCache", "run_request", "serve_all",
           "utilisation", "solo_tokens"]
