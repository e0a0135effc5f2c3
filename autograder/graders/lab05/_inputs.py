"""lab05's inputs, shared by the probes (in the student's process) and the tests (which build
the same ones to compute what to expect). No reference here, and no student code.

The shipped configs, the shipped tiny model, the allocator's operation sequences, and
ToyPagedLM, a deterministic decoder whose whole memory is the cache it is given (its logits
are an integer hash of the token ids the cache gives back, in order), so a cache that
loses, reorders or overwrites tokens changes the tokens.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

import torch

import course
from course.tiny_model import TINY_MODEL_DIR

from autograder.checks import ledger_counts, shipped_decoder
from autograder.core import describe, is_raised

CONFIGS = Path(TINY_MODEL_DIR).parent / "configs"     # datasets/configs (the graders may run without __file__)


# Small configs written for the cases the shipped ones cannot tell apart (each holds a few
# sizes, enough for kv_bytes_for_config; the comment is what it pins down).
HAND_CONFIGS = {
    # head_dim 32 although hidden_size // num_attention_heads = 16 (as Gemma's configs do)
    "explicit head_dim": {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                          "hidden_size": 64, "head_dim": 32, "torch_dtype": "float16"},
    # Llama names without num_key_value_heads: MHA, 4 K/V heads
    "llama names, MHA": {"num_hidden_layers": 3, "num_attention_heads": 4, "hidden_size": 64,
                         "torch_dtype": "bfloat16"},
    # neither dtype nor torch_dtype: float32
    "no number type": {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                       "hidden_size": 16},
    # the two rows of DTYPE_BYTES no shipped config uses: 8 bytes, and 1 byte (written as `dtype`)
    "float64": {"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "hidden_size": 8,
                "torch_dtype": "float64"},
    "float8_e4m3fn": {"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                      "hidden_size": 32, "dtype": "float8_e4m3fn"},
}


def config(name):
    """A config.json by name: a folder of datasets/configs, "llama-3-8b with `dtype`" (as current
    transformers saves it: `dtype`, no `torch_dtype`), "datasets/tiny-model" or one of HAND_CONFIGS."""
    if name in HAND_CONFIGS:
        return copy.deepcopy(HAND_CONFIGS[name])
    if name == "datasets/tiny-model":
        return json.loads((Path(TINY_MODEL_DIR) / "config.json").read_text(encoding="utf-8"))
    if name == "llama-3-8b with `dtype`":
        cfg = config("llama-3-8b")
        cfg["dtype"] = cfg.pop("torch_dtype")
        return cfg
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


def ids(tokens):
    return torch.tensor([list(tokens)], dtype=torch.long)


def plain_result(out):
    """A run's result dict with only the contract's keys (FinishReason as its value)."""
    if isinstance(out, dict) and not is_raised(out):
        keep = {}
        for key in ("tokens", "finish_reason", "raw_output", "error", "preemptions"):
            if key in out:
                value = out[key]
                keep[key] = str(value.value) if isinstance(value, course.FinishReason) else value
        return keep
    return out


def allocator_state(pool):
    """The pool's blocks in use as the grader counted them (a pool built by audited())."""
    return ledger_counts(pool)


def raise_on(n):
    """An on_token that raises CallbackError at its n-th token (0-based)."""
    seen = []

    def on_token(token):
        seen.append(token)
        if len(seen) > n:
            raise CallbackError(f"the caller's callback failed at token {n}")
    return on_token


@lru_cache(maxsize=1)
def toy_path():
    """The toy's greedy tokens from TOY_PROMPT (20 of them), computed from its hash
    directly (no cache): inputs for the runs (which token is EOS, which is blocked)."""
    h, out = _H0, []
    for tok in TOY_PROMPT:
        h = (h * 1_000_003 + tok * 7919 + 17) % _MOD
    for _ in range(20):
        row = _row(h)
        tok = row.index(max(row))
        out.append(tok)
        h = (h * 1_000_003 + tok * 7919 + 17) % _MOD
    return tuple(out)


def toy_run(decoder_kw, kw):
    """A fresh toy decoder (on a FakeClock that advances 1.0 per call) and the run's keyword
    arguments with the symbolic ones made real: cancel_after=n, deadline (on that clock),
    on_token {"raise_at": n} or "record", eos_token_id "eos", content_filter "block". The
    prompt is TOY_PROMPT unless kw names another ("prompt": list of ids): decoder.prompt."""
    clock = course.FakeClock(5.0)
    decoder = ToyPagedLM(clock=clock, **(decoder_kw or {}))
    kw = copy.deepcopy(dict(kw))
    decoder.prompt = list(kw.pop("prompt", TOY_PROMPT))
    if "cancel_after" in kw:
        kw["cancel"] = CancelAfter(decoder, kw.pop("cancel_after"))
    if "deadline" in kw:
        kw["clock"] = clock
    decoder.streamed = None                            # what on_token received, when the run records it
    if isinstance(kw.get("on_token"), dict):
        kw["on_token"] = raise_on(kw["on_token"]["raise_at"])
    elif kw.get("on_token") == "record":
        decoder.streamed = []
        kw["on_token"] = decoder.streamed.append
    if kw.get("eos_token_id") == "eos":
        kw["eos_token_id"] = toy_path()[4]             # the 5th greedy token ends the run
    if kw.get("content_filter") == "block":
        blocked = toy_path()[2]
        kw["content_filter"] = lambda t, raw: t == blocked
    return decoder, kw


# ================================================================= the shipped model (an input)

@lru_cache(maxsize=1)
def shipped():
    """(CourseDecoder, three prompts' ids, eos id) of the shipped tiny model, loaded once
    from its files (no transformers import: a self-check's sandbox starts seconds sooner)."""
    from course.tiny_model import LAB_PROMPTS

    decoder, tokenizer, eos = shipped_decoder()
    prompts = [[int(t) for t in tokenizer.encode(p).ids] for p in (LAB_PROMPTS[0], LAB_PROMPTS[16], LAB_PROMPTS[19])]
    return decoder, prompts, eos


def shipped_requests():
    _, prompts, _ = shipped()
    return [{"prompt": prompts[0], "max_tokens": 16}, {"prompt": prompts[1], "max_tokens": 14},
            {"prompt": prompts[2], "max_tokens": 12}]


def greedy_rows(decoder, prompt, kv, steps):
    logits, kv = decoder.prefill(ids(prompt), kv=kv)
    rows, tokens = [logits[0, -1]], []
    for _ in range(steps):
        token = int(torch.argmax(logits[0, -1]))
        tokens.append(token)
        logits, kv = decoder.decode(ids([token]), kv)
        rows.append(logits[0, -1])
    return tokens, torch.stack(rows)


def keys(n, offset=0):
    """n tokens of keys (1, 1, n, 2): offset, offset + 1, ... in order."""
    return torch.arange(offset, offset + 2 * n, dtype=torch.float32).view(1, 1, n, 2)


# ================================================================= the allocator's operations

def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:
        return type(e).__name__, str(e)


def run_ops(alloc, ops):
    """Apply (op, n, pick) steps to `alloc`; return one id-agnostic observation per step.

    Handles are the id lists a request holds; ops refer to them by index, so any
    allocator that gives out other ids is observed the same way. With `first` the first id
    of handle number `pick` (mod the live handles):
        allocate n / share the handle / free the handle
        bad_free: free([first, the lowest free id]); bad_free_first: the same ids, bad one first
        unknown_free: free([first, num_blocks + pick]); unknown_free_first: bad one first
        negative_free: free([first, -1 - pick]); repeat_free: free([first, first])
        bad_share: share([the lowest free id]); unknown_share: share([num_blocks + pick])
        repeat_share: share([first, first]) (each listed id one more user: first gets two)
        attributes: notes [num_blocks, block_size]
    A failed free also notes whether its message shows the bad id. A sequence may start with
    ["pool", num_blocks, block_size], the allocator's sizes (see allocator_sizes), a step observed as skipped."""
    live, steps = [], []
    N = alloc.num_blocks
    for op, n, pick in ops:
        note = None
        if op == "allocate":
            kind, got = _outcome(lambda: alloc.allocate(n))
            if kind == "ok":
                got_ids = list(got)
                note = [len(got_ids) == n, len(set(got_ids)) == n,
                        all(isinstance(b, int) and 0 <= b < N for b in got_ids),
                        all(alloc.refcount(b) == 1 for b in got_ids)]
                live.append(got_ids)
        elif op == "share" and live:
            held = live[pick % len(live)]
            kind, _ = _outcome(lambda: alloc.share(list(held)))
            if kind == "ok":
                live.append(list(held))
        elif op == "attributes":
            kind, note = "ok", [alloc.num_blocks, alloc.block_size]
        elif op == "repeat_share" and live:
            first = live[pick % len(live)][0]
            kind, _ = _outcome(lambda: alloc.share([first, first]))
            if kind == "ok":
                live += [[first], [first]]
        elif op == "free" and live:
            held = live[pick % len(live)]
            kind, _ = _outcome(lambda: alloc.free(list(held)))
            if kind == "ok":
                live.remove(held)
        elif op in ("bad_free", "unknown_free", "bad_free_first", "unknown_free_first", "negative_free",
                    "repeat_free", "bad_share", "unknown_share") and live and live[pick % len(live)]:
            first = live[pick % len(live)][0]
            if op in ("bad_free", "bad_free_first", "bad_share"):      # the lowest free id
                free_ids = [b for b in range(N) if alloc.refcount(b) == 0]
                if not free_ids:
                    steps.append(["skip"])
                    continue
                bad = free_ids[0]
            elif op == "negative_free":
                bad = -1 - pick
            elif op == "repeat_free":                                   # one id twice in one call
                bad = first
            else:
                bad = N + pick
            if op.endswith("share"):
                kind, msg = _outcome(lambda: alloc.share([bad]))
            else:
                arg = [bad, first] if op.endswith("_first") else [first, bad]
                kind, msg = _outcome(lambda: alloc.free(arg))
            note = str(bad) in msg if kind != "ok" and not op.endswith("share") else None
        else:
            steps.append(["skip"])
            continue
        steps.append([op, kind if kind in ("ok", "OutOfBlocks", "ValueError") else "other: " + kind, note,
                      alloc.num_free, alloc.num_used, alloc.high_water,
                      [[alloc.refcount(b) for b in held_ids] for held_ids in live]])
    for held_ids in live:                  # every request ends: the pool must be as free as it started
        alloc.free(list(held_ids))
    steps.append(["end", alloc.num_free, alloc.num_used])
    return steps


def allocator_sizes(seq):
    """(num_blocks, block_size) of a sequence: its leading ["pool", n, size] step, else (8, 4)."""
    return (seq[0][1], seq[0][2]) if seq and seq[0][0] == "pool" else (8, 4)


@lru_cache(maxsize=1)
def op_sequences():
    """The 60 operation sequences of datasets/fixtures/allocator_ops.json (drawn once by
    hypothesis, derandomized, by datasets/generators/fixtures_lab05.py)."""
    data = json.loads((Path(TINY_MODEL_DIR).parent / "fixtures" / "allocator_ops.json").read_text(encoding="utf-8"))
    return tuple(tuple(tuple(step) for step in seq) for seq in data["sequences"])


def sequences(which):
    """The operation sequences of a case: a list of sequences (plain), or "fixtures"."""
    return op_sequences() if which == "fixtures" else tuple(tuple(tuple(s) for s in seq) for seq in which)
