"""lab05's probes: they run in the student's process and return plain data. No reference here.

Each probe builds its inputs (_inputs.py: the configs, the KVPool of the notebook's setup
cell, the shipped tiny model, the allocator's operation sequences, the toy decoder), calls
the student's code and records what happened. Plain arguments (numbers, lists, names of
inputs) come from the tests' markers; a probe deep-copies what it hands the student's code.

Every pool a probe builds is audited (checks.Ledger in front of its allocator): the free
blocks a case judges (after a run, a release, a reserve) are the grader's count of the ids
handed out and given back, never the student's allocator's num_free, which could lie. The
allocator's own counters are judged only where they are the exercise (run_ops).

A probe is a public function whose first parameter is `ns` (the student's namespace).
"""
from __future__ import annotations

import copy

import torch

import course

from autograder.checks import audited, one_thread, record
from autograder.core import Fail, function, is_raised

from ._inputs import (TOY_PROMPT, CallbackError, ToyPagedLM, allocator_sizes, allocator_state, config, greedy_rows,
                      ids, keys, plain_result, raise_on, run_ops, sequences, shipped, shipped_requests, toy_run,
                      toy_text)


def _pool(ns, num_blocks, block_size, n_layer=2, n_kv_heads=1, head_dim=2):
    KVPool = ns.get("KVPool")
    if KVPool is None:
        raise Fail("no class named `KVPool` was found (it is defined in the setup cell)",
                   hint="Run the setup cell that defines OutOfBlocks and KVPool; do not rename them.")
    return audited(KVPool(n_layer, n_kv_heads, head_dim, num_blocks, block_size))



def _free(pool):
    """Free blocks by the grader's count (audited pools), never by the student's allocator."""
    return allocator_state(pool)["num_free"]


def calls(ns, fn_name, arg_list):
    """fn_name(*args, **kwargs) for each [args, kwargs] of arg_list, recorded."""
    fn = function(ns, fn_name)
    return [record(fn, tuple(copy.deepcopy(args)), copy.deepcopy(kwargs)) for args, kwargs in arg_list]


def config_calls(ns, names, dtype_bytes=None):
    """kv_bytes_for_config on the config of each name (see config()), recorded."""
    fn = function(ns, "kv_bytes_for_config")
    return [record(fn, (config(n),), {} if dtype_bytes is None else {"dtype_bytes": dtype_bytes}) for n in names]


def ops(ns, which):
    """run_ops on a fresh BlockAllocator per sequence, (8, 4) unless it names its sizes (see sequences())."""
    return [run_ops(function(ns, "BlockAllocator")(*allocator_sizes(s)), s) for s in sequences(which)]


def _cache(ns, pool):
    return function(ns, "PagedKVCache")(pool)


def parity(ns, block_size, prompt_index, steps):
    """Greedy steps of the tiny model on the student's PagedKVCache (a pool of 64 blocks)."""
    with one_thread():
        decoder, prompts, _ = shipped()
        KVPool = ns.get("KVPool")
        if KVPool is None:
            raise Fail("no class named `KVPool` was found (it is defined in the setup cell)")
        c = decoder.config
        pool = audited(KVPool(c.n_layer, c.n_head, c.head_dim, 64, block_size))
        kv = _cache(ns, pool)
        tokens, rows = greedy_rows(decoder, prompts[prompt_index], kv, steps)
        out = {"tokens": tokens, "rows": rows, "length": kv.length, "table": len(kv.block_table),
               "bytes": kv.bytes_allocated()}
        kv.release()
        out["free_after_release"] = _free(pool)
        return out


def parity_pair(ns, first, second):
    """parity() twice: [block_size, prompt_index, steps] each."""
    return [parity(ns, *first), parity(ns, *second)]


def fragmented(ns):
    pool = _pool(ns, 12, 2)
    other, kv = _cache(ns, pool), _cache(ns, pool)
    x = keys(9)
    for t in range(9):   # two sequences interleaved: kv's blocks are not consecutive ids
        for layer in range(2):
            other.append(layer, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
            kv.append(layer, x[:, :, t:t + 1], -x[:, :, t:t + 1])
    other.release()
    more = keys(3, 100)
    for layer in range(2):
        k, v = kv.append(layer, more, -more)    # reuses the blocks `other` gave back
    return {"k": k, "v": v}


def descending_blocks(ns):
    """A cache on a pool of 4 blocks of 2 whose every block is taken, then given back one at a
    time, highest id first, just before the cache needs it: the table is [3, 2, 1] under any
    allocation policy."""
    pool = _pool(ns, 4, 2)
    kv = _cache(ns, pool)
    hog = sorted(pool.allocator.allocate(4))
    for j, b in enumerate([3, 2, 1]):
        pool.allocator.free([hog[b]])
        x = keys(2, 2 * 2 * j)
        for layer in range(2):
            k, v = kv.append(layer, x, -x)
    return {"table": list(kv.block_table), "k": k, "v": v, "gathered": list(kv.gather(0))}


def length_mid_forward(ns):
    """length after each layer's append: 3 tokens, then 2 more (2 layers)."""
    kv = _cache(ns, _pool(ns, 8, 2))
    seen = []
    for t, offset in ((3, 0), (2, 30)):
        for layer in range(2):
            kv.append(layer, keys(t, offset), keys(t, offset))
            seen.append(kv.length)
    return seen


def exact_multiple(ns):
    pool = _pool(ns, 8, 4)
    kv = _cache(ns, pool)
    seen = []
    x = keys(8)
    for layer in range(2):
        kv.append(layer, x, x)                  # exactly 2 blocks
    seen.append([kv.length, len(kv.block_table)])
    y = keys(1, 50)
    for layer in range(2):
        k, _ = kv.append(layer, y, y)           # token 8 needs a third block
    seen.append([kv.length, len(kv.block_table)])
    gathered, _ = kv.gather(0)                  # 9 tokens, not the 12 slots of 3 blocks
    return {"seen": seen, "k": k, "gathered": gathered}


def out_of_blocks(ns):
    pool = _pool(ns, 3, 2)
    kv = _cache(ns, pool)
    for layer in range(2):
        kv.append(layer, keys(4), keys(4))
    hog = pool.allocator.allocate(1)
    before = [kv.length, list(kv.block_table), _free(pool)]
    rec = record(kv.append, (0, keys(1, 60), keys(1, 60)))
    after = [kv.length, list(kv.block_table), _free(pool)]
    k, _ = kv.gather(1)
    pool.allocator.free(hog)
    for layer in range(2):
        k2, _ = kv.append(layer, keys(1, 60), keys(1, 60))
    return {"raised": rec["result"]["__raised__"] if is_raised(rec["result"]) else None,
            "same": before == after, "k": k, "k2": k2}


def release(ns):
    pool = _pool(ns, 6, 2)
    kv = _cache(ns, pool)
    for layer in range(2):
        kv.append(layer, keys(5), keys(5))
    held, held_bytes = len(kv.block_table), kv.bytes_allocated()
    kv.release()
    kv.release()
    empty = [list(x.shape) for x in kv.gather(0)]          # an empty cache gathers (1, H, 0, D)
    return [held, held_bytes, _free(pool), kv.length, list(kv.block_table), kv.bytes_allocated(), empty]


def reserve(ns):
    pool = _pool(ns, 4, 4)
    kv = _cache(ns, pool)
    kv.reserve(0)
    a0 = [len(kv.block_table), _free(pool)]
    kv.reserve(9)
    a = [len(kv.block_table), _free(pool)]
    rec = record(kv.reserve, (20,))
    b = [len(kv.block_table), _free(pool)]
    kv.release()
    return {"a0": a0, "a": a, "raised": rec["result"]["__raised__"] if is_raised(rec["result"]) else None, "b": b}


def runs(ns, setups, pool_blocks=16, block_size=2):
    """run_request on TOY_PROMPT (or the setup's prompt) once per [decoder_kw, run kwargs] (see
    toy_run), one pool for all."""
    fn = function(ns, "run_request")
    pool = _pool(ns, pool_blocks, block_size)
    out = []
    for decoder_kw, kw in setups:
        decoder, kw = toy_run(decoder_kw, kw)
        rec = record(fn, (decoder, pool, ids(decoder.prompt)), {"to_text": toy_text, **kw})
        out.append({"result": plain_result(rec["result"]), "pool": allocator_state(pool),
                    "calls": len(decoder.calls), "streamed": decoder.streamed})
    return out


def hundred_failures(ns):
    fn = function(ns, "run_request")
    pool = _pool(ns, 12, 2)
    kinds = []
    for i in range(100):
        decoder = ToyPagedLM(fail_at=i % 5, nan_at=None if i % 3 else 2, clock=course.FakeClock())
        kw = {"to_text": toy_text, "max_tokens": 6}
        if i % 7 == 0:
            kw["on_token"] = raise_on(1)
        try:
            out = fn(decoder, pool, ids(TOY_PROMPT), **kw)
            kinds.append(str(out.get("finish_reason")) if isinstance(out, dict) else type(out).__name__)
        except CallbackError:
            kinds.append("raised")
    return {"pool": allocator_state(pool), "kinds": sorted(set(kinds))}


def bad_max_tokens(ns, values=(0,)):
    """run_request with each bad max_tokens, each on a fresh toy: the record and the model calls made."""
    out = []
    for value in values:
        decoder = ToyPagedLM()
        rec = record(function(ns, "run_request"), (decoder, _pool(ns, 4, 2), ids(TOY_PROMPT)),
                     {"max_tokens": value, "to_text": toy_text})
        rec["calls"] = len(decoder.calls)
        out.append(rec)
    return out


def serve(ns, requests, pool_blocks, block_size, on_tiny_model=False, eos_token_id=None):
    """serve_all on the toy (requests: a list of request dicts; eos_token_id as given) or, with
    on_tiny_model, on the tiny model with shipped_requests() (no EOS: the requests run long and
    collide)."""
    fn = function(ns, "serve_all")
    if on_tiny_model:
        with one_thread():
            decoder = shipped()[0]
            c = decoder.config
            pool = audited(ns.get("KVPool")(c.n_layer, c.n_head, c.head_dim, pool_blocks, block_size))
            rec = record(fn, (decoder, pool, copy.deepcopy(shipped_requests())), {"eos_token_id": None})
    else:
        decoder = ToyPagedLM()
        pool = _pool(ns, pool_blocks, block_size)
        rec = record(fn, (decoder, pool, copy.deepcopy(requests)), {"eos_token_id": eos_token_id})
    out = rec["result"]
    if isinstance(out, list):
        out = [plain_result(r) for r in out]
    return {"results": out, "pool": allocator_state(pool),
            "prefills": [c[1] for c in getattr(decoder, "calls", []) if c[0] == "prefill"]}
