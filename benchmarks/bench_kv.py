"""KV memory: the paged cache against StaticKVCache, and what paging saves. Not a test:
it prints tables and writes benchmarks/results/kv.json and kv.png.

    python benchmarks/bench_kv.py                  # or: make bench
    python benchmarks/bench_kv.py --repeats 15

1. Per-token decode time of course.decoder.CourseDecoder on the shipped tiny model, at
   batch 1 on one CPU thread, with course.paged_kv.PagedKVCache (blocks of 16) and with
   StaticKVCache (one buffer of max_len), at contexts 32 .. 1024, in the same run: each
   repeat times both caches at every context, alternating which goes first, and the
   ratio reported is the median of the per-repeat ratios paged / static.
2. Utilisation (tokens held / tokens reserved) on a fixed trace of requests: contiguous
   reservation of max_len per request against paged blocks of 8, 16 and 32.
3. Block-allocator operations per second (allocate + free pairs, share + free).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from course.decoder import CourseDecoder  # noqa: E402
from course.kv_cache import StaticKVCache  # noqa: E402
from course.paged_kv import BlockAllocator, KVPool, PagedKVCache, blocks_needed  # noqa: E402
from course.tiny_model import TINY_MODEL_DIR  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
CONTEXTS = (32, 64, 128, 256, 512, 1024)
STEPS = 8            # decode steps timed per run, ending at the context length
BLOCK = 16

# A fixed trace: (prompt tokens, generated tokens) of 24 requests, lengths spread the way
# chat traffic spreads them (many short answers, a few long ones). Deterministic.
TRACE = [(40, 60), (12, 8), (90, 150), (25, 30), (60, 12), (8, 200), (33, 45), (70, 90), (15, 120), (50, 20),
         (120, 300), (9, 5), (44, 64), (31, 17), (200, 40), (18, 250), (66, 33), (5, 90), (140, 10), (27, 77),
         (80, 128), (11, 3), (52, 180), (38, 26)]
TRACE_MAX_LEN = 1024   # a contiguous cache reserves the model's context for every request


def decode_window(decoder, ids, kv, context):
    """Seconds per decode step for the STEPS steps that bring `kv` to `context` tokens."""
    decoder.prefill(ids[:, : context - STEPS], kv=kv)
    t0 = time.perf_counter()
    for i in range(context - STEPS, context):
        logits, kv = decoder.decode(ids[:, i:i + 1], kv)
        logits[0, -1].argmax().item()
    seconds = (time.perf_counter() - t0) / STEPS
    kv.release()
    return seconds


def bench_decode(repeats):
    decoder = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cpu")
    c = decoder.config
    ids = torch.randint(0, c.vocab_size, (1, max(CONTEXTS)), generator=torch.Generator().manual_seed(0))
    pool = KVPool.for_decoder(decoder, num_blocks=blocks_needed(max(CONTEXTS), BLOCK), block_size=BLOCK)

    def static(ctx):
        return StaticKVCache(c.n_layer, 1, c.n_head, ctx, c.head_dim)

    def paged(ctx):
        return PagedKVCache(pool)

    # Same tokens from both caches (the one hard check of this benchmark).
    a = decoder.prefill(ids[:, :200], kv=static(200))[0]
    b = decoder.prefill(ids[:, :200], kv=paged(200))
    b[1].release()
    assert torch.equal(a.argmax(-1), b[0].argmax(-1)) and float((a - b[0]).abs().max()) <= 1e-5

    times = {ctx: {"static": [], "paged": []} for ctx in CONTEXTS}
    for ctx in CONTEXTS:                                   # warm-up
        decode_window(decoder, ids, static(ctx), ctx)
        decode_window(decoder, ids, paged(ctx), ctx)
    for r in range(repeats):
        for ctx in CONTEXTS:
            order = ("static", "paged") if r % 2 == 0 else ("paged", "static")
            for name in order:
                kv = static(ctx) if name == "static" else paged(ctx)
                times[ctx][name].append(decode_window(decoder, ids, kv, ctx))
    rows = []
    for ctx in CONTEXTS:
        s, p = times[ctx]["static"], times[ctx]["paged"]
        rows.append({"context": ctx, "static_ms": 1e3 * statistics.median(s), "paged_ms": 1e3 * statistics.median(p),
                     "ratio": statistics.median(pi / si for pi, si in zip(p, s))})
    assert pool.allocator.num_free == pool.num_blocks
    return rows


def bench_utilisation():
    # A request of p prompt tokens that generates n caches p + n - 1 of them: the last
    # token is returned, never fed back (course.paged_kv).
    lengths = [p + n - 1 for p, n in TRACE]
    out = {"contiguous": sum(lengths) / (TRACE_MAX_LEN * len(lengths))}
    for bs in (8, 16, 32):
        out[f"paged_{bs}"] = sum(lengths) / sum(blocks_needed(n, bs) * bs for n in lengths)
    # Memory over time when the trace runs one step per request per tick, all admitted
    # at tick 0 (tick 0 is the prefill, tick t the t-th decode, which caches token t of
    # the output): the peak of blocks held, paged (16) against contiguous.
    alloc = BlockAllocator(num_blocks=sum(blocks_needed(n, BLOCK) for n in lengths), block_size=BLOCK)
    held = [alloc.allocate(blocks_needed(p, BLOCK)) for p, _ in TRACE]
    timeline = []
    for t in range(max(n for _, n in TRACE) + 1):
        tokens = 0
        for i, (p, n) in enumerate(TRACE):
            if held[i] is None:
                continue
            if t >= n:
                alloc.free(held[i])
                held[i] = None
                continue
            length = p + t
            held[i] += alloc.allocate(blocks_needed(length, BLOCK) - len(held[i]))
            tokens += length
        live = sum(h is not None for h in held)
        timeline.append({"tick": t, "tokens": tokens, "paged": alloc.num_used * BLOCK,
                         "contiguous": live * TRACE_MAX_LEN})
    assert alloc.num_free == alloc.num_blocks
    return out, timeline


def bench_allocator(n_ops):
    a = BlockAllocator(num_blocks=4096, block_size=16)
    out = {}
    t0 = time.perf_counter()
    for _ in range(n_ops):
        a.free(a.allocate(1))
    out["allocate(1)+free"] = 2 * n_ops / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(n_ops // 16):
        a.free(a.allocate(16))
    out["allocate(16)+free (ops)"] = 2 * (n_ops // 16) / (time.perf_counter() - t0)
    ids = a.allocate(8)
    t0 = time.perf_counter()
    for _ in range(n_ops):
        a.share(ids)
        a.free(ids)
    out["share(8)+free(8)"] = 2 * n_ops / (time.perf_counter() - t0)
    a.free(ids)
    return out


def plot(rows, util, timeline, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(14, 3.6))
    ctx = [r["context"] for r in rows]
    left.plot(ctx, [r["static_ms"] for r in rows], "s-", label="StaticKVCache")
    left.plot(ctx, [r["paged_ms"] for r in rows], "o-", label=f"PagedKVCache (blocks of {BLOCK})")
    left.set_xscale("log", base=2); left.set_xlabel("context (tokens)"); left.set_ylabel("ms per decode step")
    left.set_title("decode step, tiny model, 1 thread"); left.legend(fontsize=8)
    names = list(util)
    mid.bar(names, [100 * util[n] for n in names], color=["tab:red"] + ["tab:blue"] * (len(names) - 1))
    mid.set_ylabel("% of reserved KV memory holding tokens"); mid.set_title("utilisation on the fixed trace")
    mid.set_ylim(0, 100)
    ticks = [p["tick"] for p in timeline]
    right.plot(ticks, [p["contiguous"] for p in timeline], color="tab:red", label=f"contiguous ({TRACE_MAX_LEN})")
    right.plot(ticks, [p["paged"] for p in timeline], color="tab:blue", label=f"paged ({BLOCK})")
    right.plot(ticks, [p["tokens"] for p in timeline], "k--", label="tokens held")
    right.set_xlabel("decode step"); right.set_ylabel("KV memory (tokens)"); right.set_title("memory over the trace")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--allocator-ops", type=int, default=100_000)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)

    rows = bench_decode(args.repeats)
    util, timeline = bench_utilisation()
    ops = bench_allocator(args.allocator_ops)

    print(f"Per-token decode, tiny model, batch 1, {args.threads} thread(s), median of {args.repeats} repeats")
    print(f"{'context':>8} {'static ms':>10} {'paged ms':>9} {'paged/static':>13}")
    for r in rows:
        print(f"{r['context']:>8} {r['static_ms']:>10.3f} {r['paged_ms']:>9.3f} {r['ratio']:>13.2f}")
    print(f"\nUtilisation on the fixed trace ({len(TRACE)} requests, tokens held / tokens reserved)")
    for name, value in util.items():
        print(f"{name:>12}: {100 * value:5.1f}%")
    peak = max(timeline, key=lambda p: p["contiguous"])
    print(f"peak reserved: contiguous {peak['contiguous']} tokens, paged "
          f"{max(p['paged'] for p in timeline)} tokens (tokens held at most {max(p['tokens'] for p in timeline)})")
    print("\nBlock allocator (pure Python)")
    for name, value in ops.items():
        print(f"{name:>24}: {value / 1e6:.2f} M ops/s")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "torch": torch.__version__, "cpus": os.cpu_count(), "threads": args.threads},
              "repeats": args.repeats, "block_size": BLOCK, "decode": rows, "utilisation": util,
              "trace": TRACE, "trace_max_len": TRACE_MAX_LEN, "timeline": timeline, "allocator_ops_per_s": ops}
    (out / "kv.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    plot(rows, util, timeline, out / "kv.png")
    print(f"\nwrote {out / 'kv.json'} and {out / 'kv.png'}")


if __name__ == "__main__":
    main()
