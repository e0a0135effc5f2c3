"""Graders for lab05 (the KV cache in memory).

Inputs are built in the student's process: the shipped configs, the student's own
BlockAllocator / PagedKVCache on the KVPool of the notebook's setup cell, the shipped
tiny model, and `ToyPagedLM`, a deterministic decoder whose whole memory is the cache
it is given (its logits are an integer hash of the token ids the cache gives back, in
order), so a cache that loses, reorders or overwrites tokens changes the tokens. Probes
return plain data; judges recompute every expectation with autograder/reference/lab05.py
(course.paged_kv), never trusting the student's process. Operation sequences for the
allocator were drawn by hypothesis with derandomize=True and no example database, once,
into datasets/fixtures/allocator_ops.json: the same sequences on every run, so a grade
never depends on luck (nor on hypothesis running in the student's process).

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes)
  | 2 * L * H_kv * D * bytes; MHA, GQA, MQA           | tiny_model_mha, gqa_llama_3_8b_bf16, mqa_one_kv_head |
  | ValueError naming the parameter and value         | rejects_bad_sizes                                     |
kv_bytes_for_config(config, dtype_bytes=None)
  | both naming schemes; K/V heads, not query heads   | gpt2_config_mha, gqa_configs_count_kv_heads           |
  | head_dim when present, else hidden // heads       | gqa_configs_count_kv_heads (qwen has no head_dim)     |
  | torch_dtype, unless dtype_bytes overrides it      | dtype_bytes_overrides_torch_dtype                     |
  | dtype (current transformers) before torch_dtype   | reads_dtype_of_current_transformers                   |
requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1)
  | worst case per request, in whole blocks; floor    | llama_16_gib, whole_blocks_round_up, none_fit         |
  | the worst case is prompt + max_tokens - 1 tokens  | last_token_is_never_cached                            |
  | ValueError naming the parameter                   | rejects_bad_arguments                                 |
BlockAllocator(num_blocks, block_size)
  | all-or-nothing, OutOfBlocks, pool unchanged       | all_or_nothing, random_operation_sequences            |
  | distinct ids in range                             | distinct_ids_in_range                                 |
  | double free / unknown id: ValueError naming it,   | double_free_names_the_id, unknown_id_names_the_id     |
  |   nothing changed (validate all first)            |                                                       |
  | refcounts: shared block kept until last free      | shared_block_kept_until_last_user                     |
  | high_water; pool as free as it started at the end | random_operation_sequences                            |
PagedKVCache(pool)
  | same tokens as StaticKVCache, logits within 1e-5  | tiny_model_parity_block_4, .._block_1_and_16          |
  | gather in block-table order                       | gather_follows_the_block_table                        |
  | a block for token block_size * k                  | exact_multiple_of_block_size                          |
  | OutOfBlocks leaves the cache unchanged            | out_of_blocks_leaves_the_cache_unchanged              |
  | release returns every block, idempotent; reserve  | release_returns_every_block, reserve_is_all_or_nothing|
run_request(decoder, pool, input_ids, *, max_tokens, to_text, ...)
  | stop / length with tokens and raw output          | eos_stop, length                                      |
  | cancelled / timeout / content_filter released     | cancelled_releases, timeout_releases, content_filter..|
  | content_filter before on_token: never streamed    | rejected_token_never_reaches_on_token                 |
  | model raises or NaN at every step: error, raw     | model_raises_at_every_step, nan_logits_at_every_step  |
  |   output kept, blocks released                    |                                                       |
  | on_token's exception propagates, blocks released  | callback_exception_propagates_and_releases            |
  | refused before any model call (also one block     | refuses_impossible_before_prefill                     |
  |   over the pool: 5 + 13 - 1 tokens in 8 blocks of 2)|                                                       |
  | refusal counts prompt + max_tokens - 1 tokens     | runs_when_it_needs_exactly_the_pool                   |
  | no growth after 100 failing requests              | no_growth_after_100_failing_requests                  |
serve_all(decoder, pool, requests, *, eos_token_id=None)
  | tokens as a solo run; nothing preempted when fits | everything_fits                                       |
  | the newest is preempted, freed, recomputed        | preempts_the_newest_and_recomputes, tiny_model_..     |
  | impossible request refused before any model call  | refuses_impossible_before_any_model_call              |
  | refusal counts prompt + max_tokens - 1 tokens     | runs_a_request_that_needs_exactly_the_pool            |
utilisation(lengths, *, block_size=None, max_len=None)
  | paged: tokens / whole blocks; contiguous: max_len | paged_blocks, contiguous_max_len, exact_blocks_..     |
  | ValueError naming the parameter                   | rejects_bad_arguments                                 |
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch

import course
from course.tiny_model import TINY_MODEL_DIR

from ..checks import Input, call_probe, on_one_thread, record, rejects, rejects_case, result_of, shipped_model
from ..core import Case, Fail, Test, describe, function, is_raised
from ..reference import lab05 as ref

LAB = "lab05"

API = {
    "kv_bytes_per_token": "(n_layer, n_kv_heads, head_dim, dtype_bytes)",
    "kv_bytes_for_config": "(config, dtype_bytes=None)",
    "requests_that_fit": "(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1)",
    "run_request": "(decoder, pool, input_ids, *, max_tokens, to_text, eos_token_id=None, cancel=None, "
                   "clock=None, deadline=None, content_filter=None, on_token=None)",
    "serve_all": "(decoder, pool, requests, *, eos_token_id=None)",
    "utilisation": "(lengths, *, block_size=None, max_len=None)",
}

# The graded classes, by constructor signature (API lists functions only).
CLASSES = {
    "BlockAllocator": "(num_blocks, block_size)",
    "PagedKVCache": "(pool)",
}

CONFIGS = Path(TINY_MODEL_DIR).parent / "configs"     # datasets/configs (the graders may run without __file__)


def _config(name):
    return json.loads((CONFIGS / name / "config.json").read_text(encoding="utf-8"))


# ================================================================= the toy decoder (an input)

_H0, _MOD, _V = 12345, 2_147_483_647, 13


def _row(h):
    a, b = 1 + h % (_V - 1), (h // (_V - 1)) % _V
    return [float((a * v + b) % _V) for v in range(_V)]   # a permutation of 0..12: no ties


class InjectedFailure(RuntimeError):
    """What ToyPagedLM raises at the call it was told to fail."""


class ToyPagedLM:
    """A decoder with the call shapes of CourseDecoder whose only memory is the cache.

    Each call writes k = v = [token id, position] for the new tokens at every layer
    (n_layer 2, one K/V head, head_dim 2) and computes each new position's logits as
    an integer hash of the token ids the LAST layer's cache returns, in order. Logits
    are exact permutations of 0..12, so greedy choices never tie.

    fail_at=k: call k (0 = the prefill) raises InjectedFailure after the first layer
    was written (a failure mid-forward). nan_at=k: call k returns NaN logits.
    clock: a FakeClock advanced by 1.0 per call. calls: ["prefill", ids] / ["decode", ids].
    max_calls stops a runaway loop.
    """
    n_layer, n_head, head_dim, vocab_size, eos_token_id = 2, 1, 2, _V, 0

    def __init__(self, fail_at=None, nan_at=None, clock=None, max_calls=4000):
        self.fail_at, self.nan_at, self.clock, self.max_calls = fail_at, nan_at, clock, max_calls
        self.calls = []

    def _run(self, kind, ids, kv):
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"`input_ids` must be a (1, T) tensor, got {describe(ids)}.")
        n = len(self.calls)
        if n >= self.max_calls:
            raise RuntimeError(f"ToyPagedLM: more than {self.max_calls} calls (a loop that never ends?)")
        tokens = [int(t) for t in ids[0].tolist()]
        self.calls.append([kind, tokens])
        if self.clock is not None:
            self.clock.advance(1.0)
        past = kv.length
        t = len(tokens)
        x = torch.tensor([[tok, past + i] for i, tok in enumerate(tokens)], dtype=torch.float32)  # (t, 2)
        for layer in range(self.n_layer):
            k_all, _ = kv.append(layer, x.view(1, 1, t, 2).clone(), x.view(1, 1, t, 2).clone())
            if layer == 0 and self.fail_at == n:
                raise InjectedFailure(f"injected failure in call {n}")
        seq = [int(round(float(v))) for v in k_all[0, 0, :, 0].tolist()]   # every token, cache order
        h, rows = _H0, []
        for j, tok in enumerate(seq):
            h = (h * 1_000_003 + tok * 7919 + 17) % _MOD
            if j >= len(seq) - t:
                rows.append(_row(h))
        logits = torch.tensor([rows], dtype=torch.float32)                   # (1, t, V)
        if self.nan_at == n:
            logits[:] = float("nan")
        return logits, kv

    def prefill(self, input_ids, attention_mask=None, kv=None):
        return self._run("prefill", input_ids, kv)

    def decode(self, token_ids, kv, attention_mask=None):
        return self._run("decode", token_ids, kv)


def toy_text(tokens):
    """to_text for the toy: one readable piece per id."""
    return "".join(f"<{t}>" for t in tokens)


class CancelAfter:
    """is_set() becomes True once the decoder has made `n` calls."""

    def __init__(self, decoder, n):
        self.decoder, self.n = decoder, n

    def is_set(self):
        return len(self.decoder.calls) >= self.n


class CallbackError(Exception):
    """What the grader's own on_token raises."""


TOY_PROMPT = [3, 7, 1, 12, 5]


def _ids(tokens):
    return torch.tensor([list(tokens)], dtype=torch.long)


def _pool(ns, num_blocks, block_size, n_layer=2, n_kv_heads=1, head_dim=2):
    KVPool = ns.get("KVPool")
    if KVPool is None:
        raise Fail("no class named `KVPool` was found (it is defined in the setup cell)",
                   hint="Run the setup cell that defines OutOfBlocks and KVPool; do not rename them.")
    return KVPool(n_layer, n_kv_heads, head_dim, num_blocks, block_size)


def _ref_pool(num_blocks, block_size):
    return ref.KVPool(2, 1, 2, num_blocks, block_size)


def _plain_result(out):
    if isinstance(out, dict) and not is_raised(out):
        keep = {}
        for key in ("tokens", "finish_reason", "raw_output", "error", "preemptions"):
            if key in out:
                value = out[key]
                keep[key] = str(value.value) if isinstance(value, course.FinishReason) else value
        return keep
    return out


def _allocator_state(pool):
    a = pool.allocator
    return {"num_free": a.num_free, "num_used": a.num_used, "high_water": a.high_water}


# ================================================================= shipped model

@lru_cache(maxsize=1)
def _shipped():
    from course.decoder import CourseDecoder
    from course.tiny_model import LAB_PROMPTS

    hf, tokenizer = shipped_model()
    decoder = CourseDecoder.from_pretrained(hf)
    prompts = [[int(t) for t in tokenizer.encode(p)] for p in (LAB_PROMPTS[0], LAB_PROMPTS[16], LAB_PROMPTS[19])]
    return decoder, prompts, int(tokenizer.eos_token_id)


def _greedy_rows(decoder, prompt, kv, steps):
    logits, kv = decoder.prefill(_ids(prompt), kv=kv)
    rows, tokens = [logits[0, -1]], []
    for _ in range(steps):
        token = int(torch.argmax(logits[0, -1]))
        tokens.append(token)
        logits, kv = decoder.decode(_ids([token]), kv)
        rows.append(logits[0, -1])
    return tokens, torch.stack(rows)


# ================================================================= formula

def _bytes_case(name, args, hint, visible=False):
    inp = Input(f"{args}", lambda: tuple(args))

    def judge(recs):
        call = f"kv_bytes_per_token{tuple(args)}"
        got = result_of(recs[0], call)
        expected = ref.kv_bytes_per_token(*args)
        if type(got) is not int or got != expected:
            raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return Case(name, 1, call_probe("kv_bytes_per_token", [inp]), judge, visible=visible)


def _config_case(name, names, hint, dtype_bytes=None, visible=False, points=1):
    inputs = [Input(f"datasets/configs/{n}/config.json", lambda n=n: (_config(n),),
                    {} if dtype_bytes is None else {"dtype_bytes": dtype_bytes}) for n in names]

    def judge(recs):
        for n, rec in zip(names, recs):
            call = f"kv_bytes_for_config(<{n}>{'' if dtype_bytes is None else f', dtype_bytes={dtype_bytes}'})"
            got = result_of(rec, call)
            expected = ref.kv_bytes_for_config(_config(n), dtype_bytes)
            if type(got) is not int or got != expected:
                raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return Case(name, points, call_probe("kv_bytes_for_config", inputs), judge, visible=visible)


def _dtype_config():
    """Llama-3-8B's config as current transformers saves it: `dtype`, no `torch_dtype`."""
    cfg = _config("llama-3-8b")
    cfg["dtype"] = cfg.pop("torch_dtype")
    return cfg


def _tiny_config():
    return json.loads((Path(TINY_MODEL_DIR) / "config.json").read_text(encoding="utf-8"))


def _dtype_case(name, hint, points=1):
    configs = (("llama-3-8b with `dtype`", _dtype_config), ("datasets/tiny-model", _tiny_config))
    inputs = [Input(label, lambda make=make: (make(),)) for label, make in configs]

    def judge(recs):
        for (label, make), rec in zip(configs, recs):
            call = f"kv_bytes_for_config(<{label}>)"
            got = result_of(rec, call)
            expected = ref.kv_bytes_for_config(make())
            if type(got) is not int or got != expected:
                raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return Case(name, points, call_probe("kv_bytes_for_config", inputs), judge)


_KV_HINT = ("Count the KEY/VALUE heads: num_key_value_heads when the config has it (GQA/MQA), else the "
            "number of attention heads (MHA). Query heads do not take cache memory.")

FORMULA = Test(LAB, "kv_bytes_per_token_counts_kv_heads",
               "bytes per token from the K/V heads, for MHA, GQA and MQA, and from config.json files", (
    _bytes_case("tiny_model_mha", (4, 4, 32, 4), "2 (key and value) * n_layer * n_kv_heads * head_dim * bytes.",
                visible=True),
    _bytes_case("gqa_llama_3_8b_bf16", (32, 8, 128, 2), "Llama-3-8B keeps 8 K/V heads: 128 KiB per token."),
    _bytes_case("mqa_one_kv_head", (2, 1, 64, 2), "MQA: one K/V head for all query heads."),
    _config_case("gpt2_config_mha", ["gpt2"], "GPT-2 names its sizes n_layer, n_head, n_embd; head_dim = "
                 "n_embd // n_head; torch_dtype float32 is 4 bytes.", visible=True),
    _config_case("gqa_configs_count_kv_heads", ["llama-3-8b", "mistral-7b", "qwen2.5-7b"],
                 _KV_HINT + " Without head_dim, head_dim = hidden_size // num_attention_heads.", points=2),
    _config_case("dtype_bytes_overrides_torch_dtype", ["llama-3-8b", "gpt2"],
                 "When dtype_bytes is given (e.g. 1 for an fp8 cache), use it instead of torch_dtype.",
                 dtype_bytes=1),
    _dtype_case("reads_dtype_of_current_transformers",
                "Current transformers saves the number type as `dtype` (older versions: `torch_dtype`); "
                "read `dtype` first and fall back to `torch_dtype`."),
    rejects_case("rejects_bad_sizes", "kv_bytes_per_token", [
        ("n_layer", Input("n_layer=0", lambda: (), {"n_layer": 0, "n_kv_heads": 8, "head_dim": 128,
                                                    "dtype_bytes": 2})),
        ("n_kv_heads", Input("n_kv_heads=True", lambda: (), {"n_layer": 32, "n_kv_heads": True, "head_dim": 128,
                                                             "dtype_bytes": 2})),
        ("dtype_bytes", Input("dtype_bytes=2.0", lambda: (), {"n_layer": 32, "n_kv_heads": 8, "head_dim": 128,
                                                              "dtype_bytes": 2.0})),
    ]),
))


# ================================================================= capacity planning

def _fit_case(name, args, kwargs, hint, visible=False):
    inp = Input(f"{args}", lambda: tuple(args), kwargs)

    def judge(recs):
        call = inp.call_text("requests_that_fit")
        got = result_of(recs[0], call)
        expected = ref.requests_that_fit(*args, **kwargs)
        if type(got) is not int or got != expected:
            raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return Case(name, 1, call_probe("requests_that_fit", [inp]), judge, visible=visible)


_GiB = 1 << 30

CAPACITY = Test(LAB, "capacity_planning_counts_whole_blocks",
                "requests_that_fit: worst case per request, whole blocks, rounded down", (
    _fit_case("llama_16_gib", (16 * _GiB, 131072, 1000, 1048), {},
              "Each request may cache prompt_tokens + max_tokens - 1 tokens; budget // bytes per request.",
              visible=True),
    _fit_case("whole_blocks_round_up", (32 * 100 * 10 + 99, 100, 9, 9), {"block_size": 16},
              "9 + 9 - 1 = 17 tokens in blocks of 16 take 2 blocks = 32 tokens of memory."),
    _fit_case("none_fit", (1000, 100, 6, 6), {}, "A budget below one request fits 0 requests."),
    _fit_case("last_token_is_never_cached", (1600, 100, 9, 8), {"block_size": 16},
              "The last token is returned, never fed back, so a request caches at most prompt_tokens + "
              "max_tokens - 1 tokens: 9 + 8 - 1 = 16 fill one block of 16."),
    rejects_case("rejects_bad_arguments", "requests_that_fit", [
        ("budget_bytes", Input("-1", lambda: (-1, 100, 5, 5))),
        ("max_tokens", Input("max_tokens=0", lambda: (), {"budget_bytes": 10, "bytes_per_token": 100,
                                                          "prompt_tokens": 5, "max_tokens": 0})),
        ("block_size", Input("block_size=0", lambda: (), {"budget_bytes": 10, "bytes_per_token": 100,
                                                          "prompt_tokens": 5, "max_tokens": 5, "block_size": 0})),
    ]),
))


# ================================================================= the allocator

def _allocator(ns, num_blocks=8, block_size=4):
    return function(ns, "BlockAllocator")(num_blocks, block_size)


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:
        return type(e).__name__, str(e)


def run_ops(alloc, ops):
    """Apply (op, n, pick) steps to `alloc`; return one id-agnostic observation per step.

    Handles are the id lists a request holds; ops refer to them by index, so any
    allocator that gives out other ids is observed the same way."""
    live, steps = [], []
    N = alloc.num_blocks
    for op, n, pick in ops:
        note = None
        if op == "allocate":
            kind, got = _outcome(lambda: alloc.allocate(n))
            if kind == "ok":
                ids = list(got)
                note = [len(ids) == n, len(set(ids)) == n, all(isinstance(b, int) and 0 <= b < N for b in ids),
                        all(alloc.refcount(b) == 1 for b in ids)]
                live.append(ids)
        elif op == "share" and live:
            ids = live[pick % len(live)]
            kind, _ = _outcome(lambda: alloc.share(list(ids)))
            if kind == "ok":
                live.append(list(ids))
        elif op == "free" and live:
            ids = live[pick % len(live)]
            kind, _ = _outcome(lambda: alloc.free(list(ids)))
            if kind == "ok":
                live.remove(ids)
        elif op in ("bad_free", "unknown_free") and live and live[pick % len(live)]:
            held = live[pick % len(live)][0]
            if op == "bad_free":
                free_ids = [b for b in range(N) if alloc.refcount(b) == 0]
                if not free_ids:
                    steps.append(["skip"])
                    continue
                bad = free_ids[0]
            else:
                bad = N + pick
            kind, msg = _outcome(lambda: alloc.free([held, bad]))
            note = str(bad) in msg if kind != "ok" else None
        else:
            steps.append(["skip"])
            continue
        steps.append([op, kind if kind in ("ok", "OutOfBlocks", "ValueError") else "other: " + kind, note,
                      alloc.num_free, alloc.num_used, alloc.high_water,
                      [[alloc.refcount(b) for b in ids] for ids in live]])
    for ids in live:                       # every request ends: the pool must be as free as it started
        alloc.free(list(ids))
    steps.append(["end", alloc.num_free, alloc.num_used])
    return steps


@lru_cache(maxsize=1)
def op_sequences():
    """The 60 operation sequences of datasets/fixtures/allocator_ops.json (drawn once by
    hypothesis, derandomized, by datasets/generators/fixtures_lab05.py)."""
    data = json.loads((Path(TINY_MODEL_DIR).parent / "fixtures" / "allocator_ops.json").read_text(encoding="utf-8"))
    return tuple(tuple(tuple(step) for step in seq) for seq in data["sequences"])


def _ops_case(name, seqs, hint, points=1, visible=False):
    def probe(ns):
        return [run_ops(_allocator(ns), s) for s in seqs()]

    def judge(obs):
        for i, (seq, got) in enumerate(zip(seqs(), obs)):
            expected = run_ops(ref.BlockAllocator(8, 4), seq)
            if got != expected:
                j = next((k for k, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
                step = list(seq[j]) if j < len(seq) else "free every request at the end"
                raise Fail(f"sequence {i}, step {j} ({step}) on a pool of 8 blocks went differently",
                           expected=expected[j] if j < len(expected) else None,
                           got=got[j] if j < len(got) else None, hint=hint)
    return Case(name, points, probe, judge, visible=visible)


_STEP_FORMAT = ("Each step is observed as [op, outcome, check, num_free, num_used, high_water, refcounts of "
                "each live request's blocks]. ")

ALLOCATOR = Test(LAB, "block_allocator_invariants",
                 "BlockAllocator: all-or-nothing, clear errors, reference counts, nothing lost", (
    _ops_case("all_or_nothing", lambda: ((("allocate", 3, 0), ("allocate", 5, 0), ("allocate", 5, 0),
                                          ("allocate", 0, 0), ("free", 0, 0), ("allocate", 5, 0)),),
              _STEP_FORMAT + "An allocation that cannot get all its blocks must raise OutOfBlocks and leave "
              "the pool exactly as it was: check num_free BEFORE taking any block.", visible=True),
    _ops_case("distinct_ids_in_range", lambda: ((("allocate", 3, 0), ("allocate", 4, 0), ("free", 0, 0),
                                                 ("allocate", 2, 0), ("allocate", 1, 0)),),
              _STEP_FORMAT + "The check is [n ids, all distinct, all in [0, num_blocks), each refcount 1]."),
    _ops_case("double_free_names_the_id", lambda: ((("allocate", 2, 0), ("allocate", 2, 0), ("bad_free", 0, 1),
                                                    ("free", 0, 0), ("bad_free", 0, 0)),),
              _STEP_FORMAT + "Freeing a block that is already free raises ValueError whose message shows "
              "the id, and frees NOTHING (validate every id before changing any)."),
    _ops_case("unknown_id_names_the_id", lambda: ((("allocate", 3, 0), ("unknown_free", 0, 4),
                                                   ("unknown_free", 0, 0)),),
              _STEP_FORMAT + "An id outside [0, num_blocks) raises ValueError showing the id; the valid id "
              "listed before it must not be freed."),
    _ops_case("shared_block_kept_until_last_user", lambda: ((("allocate", 2, 0), ("share", 0, 0),
                                                             ("free", 0, 0), ("allocate", 6, 0), ("free", 0, 0),
                                                             ("free", 0, 0), ("allocate", 8, 0)),),
              _STEP_FORMAT + "share() adds a user; free() removes one; a block returns to the free list only "
              "when its count reaches 0."),
    _ops_case("random_operation_sequences", op_sequences,
              _STEP_FORMAT + "Compare your counts with the contract step by step.", points=3),
))


# ================================================================= the paged cache

def _cache(ns, pool):
    return function(ns, "PagedKVCache")(pool)


def _parity_case(name, block_size, prompt_index, steps, visible=False, points=1):
    def probe(ns):
        decoder, prompts, _ = _shipped()
        KVPool = ns.get("KVPool")
        if KVPool is None:
            raise Fail("no class named `KVPool` was found (it is defined in the setup cell)")
        c = decoder.config
        pool = KVPool(c.n_layer, c.n_head, c.head_dim, 64, block_size)
        kv = _cache(ns, pool)
        tokens, rows = _greedy_rows(decoder, prompts[prompt_index], kv, steps)
        out = {"tokens": tokens, "rows": rows, "length": kv.length, "table": len(kv.block_table),
               "bytes": kv.bytes_allocated()}
        kv.release()
        out["free_after_release"] = pool.allocator.num_free
        return out

    def judge(obs):
        decoder, prompts, _ = _shipped()
        c = decoder.config
        prompt = prompts[prompt_index]
        from course.kv_cache import StaticKVCache
        kv = StaticKVCache(c.n_layer, 1, c.n_head, len(prompt) + steps, c.head_dim)
        tokens, rows = _greedy_rows(decoder, prompt, kv, steps)
        if obs["tokens"] != tokens:
            raise Fail(f"greedy tokens on the tiny model (block_size={block_size}) differ from StaticKVCache",
                       expected=tokens, got=obs["tokens"],
                       hint="append must write the new keys/values at positions length .. length+t-1 and return "
                            "every token of that layer in order.")
        from ..core import as_tensor, close
        close(as_tensor(obs["rows"]), rows, atol=1e-5, rtol=0, what="the logits",
              hint="The paged cache must give back exactly what was written.")
        n = len(prompt) + steps
        need = ref.blocks_needed(n, block_size)
        block_bytes = block_size * ref.kv_bytes_per_token(c.n_layer, c.n_head, c.head_dim, 4)
        got = [obs["length"], obs["table"], obs["bytes"], obs["free_after_release"]]
        want = [n, need, need * block_bytes, 64]
        if got != want:
            raise Fail("[length, blocks held, bytes_allocated(), free blocks after release()] are wrong",
                       expected=want, got=got,
                       hint="Hold exactly ceil(length / block_size) blocks; bytes_allocated counts whole blocks; "
                            "release() gives every block back.")
    return Case(name, points, on_one_thread(probe), on_one_thread(judge), visible=visible)


def _both(name, a, b, points=1):
    """One case made of two: both probes run, both judges must pass."""
    def judge(obs):
        a.judge(obs[0])
        b.judge(obs[1])
    return Case(name, points, lambda ns: [a.probe(ns), b.probe(ns)], judge)


def _keys(n, offset=0):
    return torch.arange(offset, offset + 2 * n, dtype=torch.float32).view(1, 1, n, 2)   # (1, 1, n, 2)


def _probe_fragmented(ns):
    pool = _pool(ns, 12, 2)
    other, kv = _cache(ns, pool), _cache(ns, pool)
    x = _keys(9)
    for t in range(9):   # two sequences interleaved: kv's blocks are not consecutive ids
        for layer in range(2):
            other.append(layer, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
            kv.append(layer, x[:, :, t:t + 1], -x[:, :, t:t + 1])
    other.release()
    more = _keys(3, 100)
    for layer in range(2):
        k, v = kv.append(layer, more, -more)    # reuses the blocks `other` gave back
    return {"k": k, "v": v}


def _judge_fragmented(obs):
    want = torch.cat([_keys(9), _keys(3, 100)], dim=2)
    from ..core import as_tensor, close
    close(as_tensor(obs["k"]), want, atol=0, rtol=0, what="the keys returned by append",
          hint="Gather the blocks in block-table order (position p is in block_table[p // block_size]), "
               "not in order of block id.")
    close(as_tensor(obs["v"]), -want, atol=0, rtol=0, what="the values returned by append")


def _probe_multiple(ns):
    pool = _pool(ns, 8, 4)
    kv = _cache(ns, pool)
    seen = []
    x = _keys(8)
    for layer in range(2):
        kv.append(layer, x, x)                  # exactly 2 blocks
    seen.append([kv.length, len(kv.block_table)])
    y = _keys(1, 50)
    for layer in range(2):
        k, _ = kv.append(layer, y, y)           # token 8 needs a third block
    seen.append([kv.length, len(kv.block_table)])
    return {"seen": seen, "k": k}


def _judge_multiple(obs):
    if obs["seen"] != [[8, 2], [9, 3]]:
        raise Fail("[length, blocks held] after 8 tokens and after 9 (block_size 4) are wrong",
                   expected=[[8, 2], [9, 3]], got=obs["seen"],
                   hint="8 tokens fill 2 blocks exactly; the 9th token (position 8) needs block 8 // 4 = 2, a "
                        "new one. Grow when position >= blocks * block_size.")
    from ..core import as_tensor, close
    close(as_tensor(obs["k"]), torch.cat([_keys(8), _keys(1, 50)], dim=2), atol=0, rtol=0,
          what="the keys after the 9th token")


def _probe_out_of_blocks(ns):
    pool = _pool(ns, 3, 2)
    kv = _cache(ns, pool)
    for layer in range(2):
        kv.append(layer, _keys(4), _keys(4))
    hog = pool.allocator.allocate(1)
    before = [kv.length, list(kv.block_table), pool.allocator.num_free]
    rec = record(kv.append, (0, _keys(1, 60), _keys(1, 60)))
    after = [kv.length, list(kv.block_table), pool.allocator.num_free]
    k, _ = kv.gather(1)
    pool.allocator.free(hog)
    for layer in range(2):
        k2, _ = kv.append(layer, _keys(1, 60), _keys(1, 60))
    return {"raised": rec["result"]["__raised__"] if is_raised(rec["result"]) else None,
            "same": before == after, "k": k, "k2": k2}


def _judge_out_of_blocks(obs):
    if obs["raised"] != "OutOfBlocks":
        raise Fail("appending a token the pool has no block for should raise OutOfBlocks",
                   expected="OutOfBlocks", got=obs["raised"] or "no exception",
                   hint="Let the allocator's OutOfBlocks propagate, before anything is written.")
    if not obs["same"]:
        raise Fail("the failed append changed the cache (length, block table or the pool's free count)",
                   expected="unchanged", got="changed",
                   hint="Allocate first (all or nothing); write and count the tokens only after it succeeded.")
    from ..core import as_tensor, close
    close(as_tensor(obs["k"]), _keys(4), atol=0, rtol=0, what="the cache after the failed append")
    close(as_tensor(obs["k2"]), torch.cat([_keys(4), _keys(1, 60)], dim=2), atol=0, rtol=0,
          what="the keys once a block was free again")


def _probe_release(ns):
    pool = _pool(ns, 6, 2)
    kv = _cache(ns, pool)
    for layer in range(2):
        kv.append(layer, _keys(5), _keys(5))
    held = len(kv.block_table)
    kv.release()
    kv.release()
    return [held, pool.allocator.num_free, kv.length, list(kv.block_table), kv.bytes_allocated()]


def _judge_release(obs):
    if obs != [3, 6, 0, [], 0]:
        raise Fail("[blocks held for 5 tokens, free blocks after release() twice, length, block_table, "
                   "bytes_allocated()] are wrong", expected=[3, 6, 0, [], 0], got=obs,
                   hint="release() frees every block once, empties the table, and does nothing the second time.")


def _probe_reserve(ns):
    pool = _pool(ns, 4, 4)
    kv = _cache(ns, pool)
    kv.reserve(9)
    a = [len(kv.block_table), pool.allocator.num_free]
    rec = record(kv.reserve, (20,))
    b = [len(kv.block_table), pool.allocator.num_free]
    kv.release()
    return {"a": a, "raised": rec["result"]["__raised__"] if is_raised(rec["result"]) else None, "b": b}


def _judge_reserve(obs):
    want = {"a": [3, 1], "raised": "OutOfBlocks", "b": [3, 1]}
    if obs != want:
        raise Fail("reserve(9) then reserve(20) on a pool of 4 blocks of 4 went wrong", expected=want, got=obs,
                   hint="reserve(n) makes sure blocks exist for n MORE tokens, all or nothing.")


CACHE = Test(LAB, "paged_cache_matches_static",
             "PagedKVCache: the decoder runs on it unchanged; blocks on demand, in table order", (
    _parity_case("tiny_model_parity_block_4", 4, 0, 16, visible=True, points=2),
    _both("tiny_model_parity_block_1_and_16", _parity_case("b1", 1, 1, 12), _parity_case("b16", 16, 2, 20)),
    Case("gather_follows_the_block_table", 2, _probe_fragmented, _judge_fragmented),
    Case("exact_multiple_of_block_size", 1, _probe_multiple, _judge_multiple, visible=True),
    Case("out_of_blocks_leaves_the_cache_unchanged", 1, _probe_out_of_blocks, _judge_out_of_blocks),
    Case("release_returns_every_block", 1, _probe_release, _judge_release),
    Case("reserve_is_all_or_nothing", 1, _probe_reserve, _judge_reserve),
))


# ================================================================= the request runner

def _runner_probe(setups, pool_blocks=16, block_size=2):
    """setups: list of (decoder_kw, run kwargs). Probe returns one observation per run."""
    def probe(ns):
        fn = function(ns, "run_request")
        pool = _pool(ns, pool_blocks, block_size)
        out = []
        for decoder_kw, kw in setups:
            decoder, kw = _run(decoder_kw, kw)
            rec = record(fn, (decoder, pool, _ids(TOY_PROMPT)), {"to_text": toy_text, **kw})
            out.append({"result": _plain_result(rec["result"]), "pool": _allocator_state(pool),
                        "calls": len(decoder.calls), "streamed": decoder.streamed})
        return out
    return probe


def _expected_run(setup, pool_blocks, block_size):
    decoder_kw, kw = setup
    pool = _ref_pool(pool_blocks, block_size)
    decoder, kw = _run(decoder_kw, kw)
    try:
        res = ref.run_request(decoder, pool, _ids(TOY_PROMPT), to_text=toy_text, **kw)
    except CallbackError as e:
        res = {"__raised__": "CallbackError", "message": str(e)}
    return {"result": _plain_result(res), "pool": _allocator_state(pool), "calls": len(decoder.calls),
            "streamed": decoder.streamed}


def _runner_judge(setups, hint, pool_blocks=16, block_size=2, keys=("tokens", "finish_reason", "raw_output")):
    def judge(obs):
        for setup, got in zip(setups, obs):
            expected = _expected_run(setup, pool_blocks, block_size)
            call = f"run_request(toy, pool, prompt, {', '.join(f'{k}={v!r}' for k, v in setup[1].items())}" + \
                   (f") on a decoder with {setup[0]}" if setup[0] else ")")
            res = got["result"]
            if is_raised(expected["result"]):
                if not is_raised(res) or res["__raised__"] != expected["result"]["__raised__"]:
                    raise Fail(f"{call}: the exception raised by on_token should reach the caller",
                               expected="CallbackError raised", got=describe(res), hint=hint)
            else:
                res = result_of({"result": res}, call)
                if not isinstance(res, dict):
                    raise Fail(f"{call} should return a dict", got=describe(res))
                for key in keys:
                    if res.get(key) != expected["result"][key]:
                        raise Fail(f"{call}: `{key}` is wrong", expected=expected["result"][key],
                                   got=res.get(key, "(missing)"), hint=hint)
                if expected["result"]["finish_reason"] == "error" and not (
                        isinstance(res.get("error"), str) and res["error"]):
                    raise Fail(f"{call}: `error` should say what went wrong", expected="a non-empty str",
                               got=res.get("error"), hint="Put the exception's type and message in `error`.")
            if got["pool"]["num_free"] != pool_blocks:
                raise Fail(f"{call} did not give its blocks back: {pool_blocks - got['pool']['num_free']} of "
                           f"{pool_blocks} still in use after it ended", expected=pool_blocks,
                           got=got["pool"]["num_free"],
                           hint="Release the cache in a `finally:` block, so every ending (return or exception) "
                                "frees it.")
            if got["calls"] != expected["calls"]:
                raise Fail(f"{call} made {got['calls']} model calls", expected=expected["calls"],
                           got=got["calls"], hint=hint)
            if got.get("streamed") != expected["streamed"]:
                raise Fail(f"{call}: on_token received the wrong tokens", expected=expected["streamed"],
                           got=got.get("streamed"), hint=_FILTER_HINT)
    return judge


def _runner_case(name, setups, hint, points=1, visible=False, pool_blocks=16, block_size=2,
                 keys=("tokens", "finish_reason", "raw_output")):
    return Case(name, points, _runner_probe(setups, pool_blocks, block_size),
                _runner_judge(setups, hint, pool_blocks, block_size, keys), visible=visible)


def _raise_on(n):
    """An on_token that raises CallbackError at its n-th token (0-based)."""
    seen = []

    def on_token(token):
        seen.append(token)
        if len(seen) > n:
            raise CallbackError(f"the caller's callback failed at token {n}")
    return on_token


class _OnToken:
    """Stands for an on_token that raises at token n; each run builds a fresh one."""

    def __init__(self, n):
        self.n = n

    def __repr__(self):
        return f"<on_token raising at token {self.n}>"


def _run(decoder_kw, kw):
    """A fresh toy decoder (on a FakeClock that advances 1.0 per call) and the run's
    keyword arguments with the symbolic ones made real."""
    clock = course.FakeClock(5.0)
    decoder = ToyPagedLM(clock=clock, **(decoder_kw or {}))
    kw = dict(kw)
    if "cancel_after" in kw:
        kw["cancel"] = CancelAfter(decoder, kw.pop("cancel_after"))
    if "deadline" in kw:
        kw["clock"] = clock
    decoder.streamed = None                            # what on_token received, when the case records it
    if isinstance(kw.get("on_token"), _OnToken):
        kw["on_token"] = _raise_on(kw["on_token"].n)
    elif kw.get("on_token") == "record":
        decoder.streamed = []
        kw["on_token"] = decoder.streamed.append
    if kw.get("eos_token_id") == "eos":
        kw["eos_token_id"] = _toy_path()[4]            # the 5th greedy token ends the run
    if kw.get("content_filter") == "block":
        kw["content_filter"] = _block_token(_toy_path()[2])
    return decoder, kw


def _block_token(token):
    def content_filter(t, raw):
        return t == token
    return content_filter


@lru_cache(maxsize=1)
def _toy_path():
    """The toy's greedy tokens from TOY_PROMPT (20 of them), computed from its hash
    directly (no cache): inputs for the cases below (which token is EOS, which is blocked)."""
    h, out = _H0, []
    for tok in TOY_PROMPT:
        h = (h * 1_000_003 + tok * 7919 + 17) % _MOD
    for _ in range(20):
        row = _row(h)
        tok = row.index(max(row))
        out.append(tok)
        h = (h * 1_000_003 + tok * 7919 + 17) % _MOD
    return tuple(out)


_ENDING_HINT = ("Order within a step: cancel, then the deadline, then the model call (an exception or NaN "
                "logits ends the run with `error`), then append, content_filter, on_token, EOS (stop), "
                "max_tokens (length). raw_output is to_text(tokens) for EVERY ending.")
_FILTER_HINT = ("Ask content_filter before on_token: a token it rejects ends the run with content_filter and is "
                "never passed to on_token, though it stays in tokens and raw_output (as in Lab 03).")

_EXACT_HINT = ("A request caches at most prompt + max_tokens - 1 tokens (the last token is returned, never fed "
               "back): 5 + 12 - 1 = 16 tokens fill 8 blocks of 2 exactly, so it runs. Refuse only when "
               "blocks_needed(prompt + max_tokens - 1) > num_blocks.")


def _probe_bad_max(ns):
    decoder = ToyPagedLM()
    rec = record(function(ns, "run_request"), (decoder, _pool(ns, 4, 2), _ids(TOY_PROMPT)),
                 {"max_tokens": 0, "to_text": toy_text})
    rec["calls"] = len(decoder.calls)
    return rec


def _judge_bad_max(rec):
    call = "run_request(toy, pool, prompt, max_tokens=0, to_text=...)"
    rejects(rec, call, "max_tokens", 0)
    if rec["calls"]:
        raise Fail(f"{call} called the model before rejecting `max_tokens`", expected=0, got=rec["calls"],
                   hint="Validate the arguments first, before any prefill.")


def _probe_hundred(ns):
    fn = function(ns, "run_request")
    pool = _pool(ns, 12, 2)
    kinds = []
    for i in range(100):
        decoder = ToyPagedLM(fail_at=i % 5, nan_at=None if i % 3 else 2, clock=course.FakeClock())
        kw = {"to_text": toy_text, "max_tokens": 6}
        if i % 7 == 0:
            kw["on_token"] = _raise_on(1)
        try:
            out = fn(decoder, pool, _ids(TOY_PROMPT), **kw)
            kinds.append(str(out.get("finish_reason")) if isinstance(out, dict) else type(out).__name__)
        except CallbackError:
            kinds.append("raised")
    return {"pool": _allocator_state(pool), "kinds": sorted(set(kinds))}


def _judge_hundred(obs):
    if obs["pool"]["num_free"] != 12:
        raise Fail(f"after 100 failing requests {12 - obs['pool']['num_free']} of 12 blocks are still in use",
                   expected=12, got=obs["pool"]["num_free"],
                   hint="Every failure path (model error, NaN, the caller's exception) must release the cache.")
    if obs["pool"]["high_water"] > 12:
        raise Fail("the pool's high-water mark exceeds its size", expected="<= 12", got=obs["pool"]["high_water"])


RUNNER = Test(LAB, "run_request_releases_on_every_ending",
              "run_request: every ending returns the result with its raw output and gives every block back", (
    _runner_case("eos_stop", [(None, {"max_tokens": 20, "eos_token_id": "eos"})], _ENDING_HINT, visible=True),
    _runner_case("length", [(None, {"max_tokens": 6})], _ENDING_HINT, visible=True),
    _runner_case("cancelled_releases", [(None, {"max_tokens": 20, "cancel_after": 3}),
                                        (None, {"max_tokens": 20, "cancel_after": 0})], _ENDING_HINT),
    _runner_case("timeout_releases", [(None, {"max_tokens": 20, "deadline": 4.0})], _ENDING_HINT),
    _runner_case("content_filter_releases", [(None, {"max_tokens": 20, "content_filter": "block"})],
                 _ENDING_HINT),
    _runner_case("rejected_token_never_reaches_on_token",
                 [(None, {"max_tokens": 20, "content_filter": "block", "on_token": "record"})], _FILTER_HINT),
    _runner_case("model_raises_at_every_step", [({"fail_at": k}, {"max_tokens": 7}) for k in range(7)],
                 _ENDING_HINT, points=2),
    _runner_case("nan_logits_at_every_step", [({"nan_at": k}, {"max_tokens": 7}) for k in range(7)],
                 _ENDING_HINT),
    _runner_case("callback_exception_propagates_and_releases",
                 [(None, {"max_tokens": 7, "on_token": _OnToken(k)}) for k in (0, 3)],
                 "An exception from the caller's own on_token is theirs: let it propagate, but release the "
                 "cache first (try/finally).", points=2),
    _runner_case("refuses_impossible_before_prefill", [(None, {"max_tokens": 40}), (None, {"max_tokens": 13})],
                 "Compare blocks_needed(prompt + max_tokens - 1) with the pool's num_blocks BEFORE any model call; "
                 "return finish_reason error with a message, no tokens.", pool_blocks=8,
                 keys=("tokens", "finish_reason")),
    _runner_case("runs_when_it_needs_exactly_the_pool", [(None, {"max_tokens": 12})], _EXACT_HINT, pool_blocks=8),
    Case("no_growth_after_100_failing_requests", 1, _probe_hundred, _judge_hundred),
    Case("rejects_bad_max_tokens", 1, _probe_bad_max, _judge_bad_max),
))




# ================================================================= memory pressure

REQUESTS_FIT = [{"prompt": [3, 7, 1, 12, 5], "max_tokens": 9}, {"prompt": [2, 10, 11], "max_tokens": 7},
                {"prompt": [6, 6, 9, 1, 4, 8], "max_tokens": 5}]


def _serve_probe(requests, pool_blocks, block_size, shipped=False):
    def probe(ns):
        fn = function(ns, "serve_all")
        if shipped:
            decoder, eos = _shipped()[0], None         # no EOS: the requests run long and collide
            c = decoder.config
            KVPool = ns.get("KVPool")
            pool = KVPool(c.n_layer, c.n_head, c.head_dim, pool_blocks, block_size)
            reqs = _shipped_requests()
        else:
            decoder, eos = ToyPagedLM(), None
            pool = _pool(ns, pool_blocks, block_size)
            reqs = requests
        rec = record(fn, (decoder, pool, [dict(r) for r in reqs]), {"eos_token_id": eos})
        out = rec["result"]
        if isinstance(out, list):
            out = [_plain_result(r) for r in out]
        calls = [c for c in getattr(decoder, "calls", [])]
        return {"results": out, "pool": _allocator_state(pool), "prefills": [c[1] for c in calls
                                                                              if c[0] == "prefill"]}
    return on_one_thread(probe) if shipped else probe


def _shipped_requests():
    _, prompts, _ = _shipped()
    return [{"prompt": prompts[0], "max_tokens": 16}, {"prompt": prompts[1], "max_tokens": 14},
            {"prompt": prompts[2], "max_tokens": 12}]


def _serve_judge(requests, pool_blocks, block_size, hint, *, shipped=False, check_preemptions=True):
    def judge(obs):
        if shipped:
            decoder, eos = _shipped()[0], None
            c = decoder.config
            reqs = _shipped_requests()

            def new_pool(n):
                return ref.KVPool(c.n_layer, c.n_head, c.head_dim, n, block_size)
        else:
            decoder, eos, reqs = ToyPagedLM(), None, requests

            def new_pool(n):
                return _ref_pool(n, block_size)
        expected = [_plain_result(r) for r in ref.serve_all(decoder, new_pool(pool_blocks), reqs, eos_token_id=eos)]
        got = result_of({"result": obs["results"]}, "serve_all(decoder, pool, requests)")
        if not isinstance(got, list) or len(got) != len(reqs):
            raise Fail("serve_all should return one result dict per request, in request order",
                       expected=len(reqs), got=describe(got))
        for i, (g, e) in enumerate(zip(got, expected)):
            if not isinstance(g, dict):
                raise Fail(f"result {i} should be a dict", got=describe(g))
            if e["finish_reason"] == "error":
                if g.get("finish_reason") != "error" or g.get("tokens") != []:
                    raise Fail(f"request {i} can never fit (needs more blocks than the pool has) and must be "
                               "refused: finish_reason error, no tokens", expected=e, got=g, hint=hint)
                continue
            solo = ref.run_request(decoder, new_pool(64), torch.tensor([reqs[i]["prompt"]]),
                                   max_tokens=reqs[i]["max_tokens"], to_text=str, eos_token_id=eos)
            if g.get("tokens") != solo["tokens"] or g.get("finish_reason") != str(solo["finish_reason"]):
                raise Fail(f"request {i}: tokens and finish_reason should equal a solo run's",
                           expected=[solo["tokens"], str(solo["finish_reason"])],
                           got=[g.get("tokens"), g.get("finish_reason")], hint=hint)
            if check_preemptions and g.get("preemptions") != e["preemptions"]:
                raise Fail(f"request {i} was preempted {g.get('preemptions')} times",
                           expected=e["preemptions"], got=g.get("preemptions"), hint=hint)
        if obs["pool"]["num_free"] != pool_blocks:
            raise Fail("blocks are still in use after every request ended", expected=pool_blocks,
                       got=obs["pool"]["num_free"], hint="Release a request's cache when it finishes and when it "
                                                          "is preempted.")
        if obs["pool"]["high_water"] > pool_blocks:
            raise Fail("the high-water mark exceeds the pool", expected=f"<= {pool_blocks}",
                       got=obs["pool"]["high_water"])
        if not shipped:
            for i, e in enumerate(expected):
                if e["finish_reason"] == "error" and any(p[:len(reqs[i]["prompt"])] == reqs[i]["prompt"]
                                                         for p in obs["prefills"]):
                    raise Fail(f"request {i} was prefilled although it can never fit",
                               expected="no model call for it", got="a prefill of its prompt", hint=hint)
    return judge


def _serve_case(name, requests, pool_blocks, block_size, hint, points=1, visible=False, shipped=False):
    return Case(name, points, _serve_probe(requests, pool_blocks, block_size, shipped),
                on_one_thread(_serve_judge(requests, pool_blocks, block_size, hint, shipped=shipped)), visible=visible)


_PREEMPT_HINT = ("When a decode raises OutOfBlocks, preempt the NEWEST running request: release its cache, put "
                 "it at the front of the waiting queue with the tokens it has, and prefill prompt + those tokens "
                 "when it is admitted again. Admit in order while the head's prefill fits the free blocks.")

PRESSURE = Test(LAB, "memory_pressure_preempts_newest",
                "serve_all: refuse what can never fit, grow on demand, preempt the newest and recompute", (
    _serve_case("everything_fits", REQUESTS_FIT, 64, 2, _PREEMPT_HINT, visible=True),
    _serve_case("preempts_the_newest_and_recomputes", REQUESTS_FIT, 9, 2, _PREEMPT_HINT, points=3),
    _serve_case("refuses_impossible_before_any_model_call",
                [{"prompt": [9, 9, 9, 9, 9, 9, 9, 9], "max_tokens": 18}] + REQUESTS_FIT[:2], 12, 2,
                "Check every request against the WHOLE pool first (blocks_needed(prompt + max_tokens - 1) > "
                "num_blocks): refuse it at once, before any prefill.", points=2),
    _serve_case("runs_a_request_that_needs_exactly_the_pool",
                [{"prompt": TOY_PROMPT, "max_tokens": 12}, {"prompt": [2, 10, 11], "max_tokens": 6}], 8, 2,
                _EXACT_HINT),
    _serve_case("tiny_model_under_pressure", None, 9, 4, _PREEMPT_HINT, points=2, shipped=True),
))


# ================================================================= waste

def _util_case(name, calls, hint, visible=False):
    inputs = [Input(f"{lengths}", lambda lengths=lengths: (list(lengths),), kw) for lengths, kw in calls]

    def judge(recs):
        for (lengths, kw), rec, inp in zip(calls, recs, inputs):
            call = inp.call_text("utilisation")
            got = result_of(rec, call)
            expected = ref.utilisation(lengths, **kw)
            if isinstance(got, bool) or not isinstance(got, (int, float)) or abs(got - expected) > 1e-12:
                raise Fail(f"{call} is wrong", expected=expected, got=got, hint=hint)
    return Case(name, 1, call_probe("utilisation", inputs), judge, visible=visible)


WASTE = Test(LAB, "utilisation_paged_vs_contiguous",
             "utilisation: the share of reserved KV memory that holds tokens", (
    _util_case("paged_blocks", [([5, 17, 3], {"block_size": 4})],
               "Paged: each request holds ceil(n / block_size) whole blocks.", visible=True),
    _util_case("contiguous_max_len", [([5, 17, 3], {"max_len": 32})],
               "Contiguous: each request reserves max_len tokens up front."),
    _util_case("exact_blocks_are_full", [([8, 16], {"block_size": 8}), ([1], {"block_size": 1})],
               "Lengths that are multiples of block_size waste nothing."),
    rejects_case("rejects_bad_arguments", "utilisation", [
        ("lengths", Input("[]", lambda: ([],), {"block_size": 4})),
        ("block_size", Input("[3], block_size=0", lambda: ([3],), {"block_size": 0})),
        ("max_len", Input("[30], max_len=16", lambda: ([30],), {"max_len": 16})),
    ]),
))


# ================================================================= the tests

TESTS = [FORMULA, CAPACITY, ALLOCATOR, CACHE, RUNNER, PRESSURE, WASTE]
