"""KV memory: the paged cache against StaticKVCache, and what paging saves. Not a test:
it prints tables and writes benchmarks/results/kv.json and kv.png.

    python benchmarks/bench_kv.py                  # or: make bench
    python benchmarks/bench_kv.py --repeats 15

1. Per-token decode time of course.decoder.CourseDecoder on the shipped tiny model, at
   batch 1 on one CPU thread, with course.paged_kv.PagedKVCache (blocks of 16) and with
   StaticKVCache (one buffer of max_len), at contexts 32 .. 1024, in the same run: each
   repeat times both caches at every context, alternating which goes first, each run's
   time is its fastest of 24 decode steps, and the ratio reported is the median of the
   per-repeat ratios paged / static.
2. Utilisation (tokens held / tokens reserved) on a fixed workload of requests, two ways:
   measured on the pool, by running the workload through course.engine.Engine (the tiny
   model, every request arriving at once) and sampling after every step the blocks in use
   (the allocator's count) and the tokens the running requests' caches hold; and, next to
   it, the arithmetic over the requests' final lengths (what the pool would hold if every
   request reached its full length at once). Blocks of 8, 16 and 32; a contiguous cache
   reserving max_len per running request for comparison.
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
from course.batched import EngineConfig, RequestParams  # noqa: E402
from course.decoder import CourseDecoder  # noqa: E402
from course.engine import Engine  # noqa: E402
from course.kv_cache import StaticKVCache  # noqa: E402
from course.paged_kv import BlockAllocator, KVPool, PagedKVCache, blocks_needed  # noqa: E402
from course.tiny_model import TINY_MODEL_DIR  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
CONTEXTS = (32, 64, 128, 256, 512, 1024)
STEPS = 24           # decode steps timed per run, ending at the context length (32: after 8 prefilled)
BLOCK = 16

# A fixed trace: (prompt tokens, generated tokens) of 24 requests, lengths spread the way
# chat traffic spreads them (many short answers, a few long ones). Deterministic.
TRACE = [(40, 60), (12, 8), (90, 150), (25, 30), (60, 12), (8, 200), (33, 45), (70, 90), (15, 120), (50, 20),
         (120, 300), (9, 5), (44, 64), (31, 17), (200, 40), (18, 250), (66, 33), (5, 90), (140, 10), (27, 77),
         (80, 128), (11, 3), (52, 180), (38, 26)]
TRACE_MAX_LEN = 1024   # a contiguous cache reserves the model's context for every request


def decode_window(decoder, ids, kv, context):
    """Seconds of the fastest of the STEPS decode steps that bring `kv` to `context`
    tokens: another process can only add time to a step, so the fastest is the one it
    disturbed least (a mean over the steps let the load squeeze paged/static toward 1)."""
    decoder.prefill(ids[:, : context - STEPS], kv=kv)
    fastest, tokens = float("inf"), []
    for i in range(context - STEPS, context):
        t0 = time.perf_counter()
        logits, kv = decoder.decode(ids[:, i:i + 1], kv)
        tokens.append(logits[0, -1].argmax().item())
        fastest = min(fastest, time.perf_counter() - t0)
    kv.release()
    return fastest, tokens


def bench_decode(repeats):
    decoder = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cpu")
    c = decoder.config
    ids = torch.randint(0, c.vocab_size, (1, max(CONTEXTS)), generator=torch.Generator().manual_seed(0))
    pool = KVPool.for_decoder(decoder, num_blocks=blocks_needed(max(CONTEXTS), BLOCK), block_size=BLOCK)

    def static(ctx):
        return StaticKVCache(c.n_layer, 1, c.n_head, ctx, c.head_dim)

    def paged(ctx):
        return PagedKVCache(pool)

    # Same tokens from both caches (checked again at every step of every timed run).
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
            tokens = {}
            for name in order:
                kv = static(ctx) if name == "static" else paged(ctx)
                seconds, tokens[name] = decode_window(decoder, ids, kv, ctx)
                times[ctx][name].append(seconds)
            assert tokens["static"] == tokens["paged"], \
                f"paged and static chose different tokens at context {ctx} (repeat {r}): {tokens}"
    rows = []
    for ctx in CONTEXTS:
        s, p = times[ctx]["static"], times[ctx]["paged"]
        rows.append({"context": ctx, "static_ms": 1e3 * statistics.median(s), "paged_ms": 1e3 * statistics.median(p),
                     "ratio": statistics.median(pi / si for pi, si in zip(p, s)),
                     "ratio_min": min(pi / si for pi, si in zip(p, s)), "ratio_max": max(pi / si for pi, si in zip(p, s))})
    assert pool.allocator.num_free == pool.num_blocks
    return rows


def arithmetic_utilisation():
    """Tokens held / tokens reserved if every request of TRACE were at its final length:
    p + n - 1 cached tokens for p prompt tokens and n generated (the last token is
    returned, never fed back, so the engine never writes its key and value)."""
    lengths = [p + n - 1 for p, n in TRACE]
    out = {"contiguous": sum(lengths) / (TRACE_MAX_LEN * len(lengths))}
    for bs in (8, 16, 32):
        out[f"paged_{bs}"] = sum(lengths) / sum(blocks_needed(n, bs) * bs for n in lengths)
    return out


def measure_on_pool(block_sizes=(8, 16, 32)):
    """Run TRACE through the engine and sample the pool after every step: blocks in use
    against tokens held. Returns ({name: utilisation}, {name: timeline})."""
    decoder = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cpu")
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, decoder.config.vocab_size, (p,), generator=gen).tolist() for p, _ in TRACE]
    util, timelines = {}, {}
    for bs in block_sizes:
        blocks = sum(blocks_needed(p + n, bs) for p, n in TRACE) + 1     # room for all: no preemption
        engine = Engine(decoder, None, EngineConfig(num_blocks=blocks, block_size=bs, max_batch=len(TRACE),
                                                    max_waiting=len(TRACE)))
        for ids, (_, n) in zip(prompts, TRACE):
            engine.add_request(ids, RequestParams(temperature=0, max_tokens=n, ignore_eos=True))
        timeline = []
        while engine.has_unfinished():
            engine.step()
            held = sum(r.cache.length for r in engine.running)            # tokens whose K/V the pool holds
            timeline.append({"step": engine.steps, "tokens": held, "running": len(engine.running),
                             "blocks_in_use": engine.pool.allocator.num_used})
        assert engine.pool.allocator.num_used == 0, "blocks left in use after every request ended"
        live = [p for p in timeline if p["blocks_in_use"]]
        tokens = sum(p["tokens"] for p in live)
        util[f"paged_{bs}"] = {
            # over every step: tokens held / tokens the blocks in use could hold
            "token_weighted": tokens / sum(p["blocks_in_use"] * bs for p in live),
            "per_step": {k: v for k, v in zip(("median", "min"), (
                statistics.median(p["tokens"] / (p["blocks_in_use"] * bs) for p in live),
                min(p["tokens"] / (p["blocks_in_use"] * bs) for p in live)))},
            "peak_blocks": engine.pool.allocator.high_water, "steps": len(timeline)}
        if bs == BLOCK:
            util["contiguous"] = {"token_weighted": tokens / sum(p["running"] * TRACE_MAX_LEN for p in live)}
        timelines[bs] = timeline
    return util, timelines


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

    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(15, 3.8))
    ctx = [r["context"] for r in rows]
    left.plot(ctx, [r["static_ms"] for r in rows], "s-", label="StaticKVCache")
    left.plot(ctx, [r["paged_ms"] for r in rows], "o-", label=f"PagedKVCache (blocks of {BLOCK})")
    left.set_xscale("log", base=2); left.set_xlabel("context (tokens)"); left.set_ylabel("ms per decode step")
    left.set_xticks(ctx, [str(c) for c in ctx]); left.minorticks_off()                  # 32 ... 1024, not 2^5
    left.set_title("decode step, tiny model, 1 thread"); left.legend(fontsize=8)
    names = list(util["arithmetic"])
    x = range(len(names))
    mid.bar([i - 0.2 for i in x], [100 * util["arithmetic"][n] for n in names], 0.4, color="tab:gray",
            label="arithmetic (final lengths)")
    mid.bar([i + 0.2 for i in x], [100 * util["measured"][n]["token_weighted"] for n in names], 0.4,
            color="tab:blue", label="measured on the pool, every step")
    mid.set_xticks(list(x), names)
    mid.set_ylabel("% of reserved KV memory holding tokens"); mid.set_title("utilisation on the fixed workload")
    mid.set_ylim(0, 100); mid.legend(fontsize=7, loc="lower right")
    ticks = [p["step"] for p in timeline]
    right.plot(ticks, [p["running"] * TRACE_MAX_LEN for p in timeline], color="tab:red",
               label=f"contiguous ({TRACE_MAX_LEN} per request)")
    right.plot(ticks, [p["blocks_in_use"] * BLOCK for p in timeline], color="tab:blue",
               label=f"paged blocks in use ({BLOCK})")
    right.plot(ticks, [p["tokens"] for p in timeline], "k--", label="tokens held")
    right.set_xlabel("engine step"); right.set_ylabel("KV memory (tokens)")
    right.set_yscale("log"); right.set_title("the pool over the workload (measured)"); right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--allocator-ops", type=int, default=100_000)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--replot", action="store_true", help="only redraw OUT/kv.png from OUT/kv.json")
    args = ap.parse_args(argv)
    if args.replot:
        saved = json.loads((Path(args.out) / "kv.json").read_text(encoding="utf-8"))
        plot(saved["decode"], saved["utilisation"], saved["timeline_measured"], Path(args.out) / "kv.png")
        print(f"wrote {Path(args.out) / 'kv.png'}")
        return
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)

    load = [os.getloadavg()[0]]
    rows = bench_decode(args.repeats)
    load.append(os.getloadavg()[0])
    arithmetic = arithmetic_utilisation()
    measured, timelines = measure_on_pool()
    util = {"arithmetic": arithmetic, "measured": measured}
    timeline = timelines[BLOCK]
    ops = bench_allocator(args.allocator_ops)

    print(f"Per-token decode, tiny model, batch 1, {args.threads} thread(s): the fastest of {STEPS} steps per run, "
          f"median of {args.repeats} repeats")
    print(f"{'context':>8} {'static ms':>10} {'paged ms':>9} {'paged/static':>13} (median of the ratios within a "
          "repeat [min-max])")
    for r in rows:
        print(f"{r['context']:>8} {r['static_ms']:>10.3f} {r['paged_ms']:>9.3f} {r['ratio']:>13.2f} "
              f"[{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]")
    print(f"\nUtilisation on the fixed workload ({len(TRACE)} requests, tokens held / tokens reserved)")
    print(f"{'':>12} {'measured on the pool':>21} {'per step: median, min':>22} {'arithmetic':>11}")
    for name in arithmetic:
        m = measured[name]
        per = m.get("per_step")
        per = f"{100 * per['median']:.1f}% {100 * per['min']:.1f}%" if per else ""
        print(f"{name:>12} {100 * m['token_weighted']:20.1f}% {per:>22} {100 * arithmetic[name]:10.1f}%")
    print(f"peak blocks in use (blocks of {BLOCK}): {measured[f'paged_{BLOCK}']['peak_blocks']}, "
          f"tokens held at most {max(p['tokens'] for p in timeline)}")
    print("\nBlock allocator (pure Python)")
    for name, value in ops.items():
        print(f"{name:>24}: {value / 1e6:.2f} M ops/s")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load.append(os.getloadavg()[0])
    record = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "torch": torch.__version__, "cpus": os.cpu_count(), "threads": args.threads},
              "load_average_1min": {"start": load[0], "after_decode": load[1], "end": load[2]},
              "repeats": args.repeats, "block_size": BLOCK, "decode": rows, "utilisation": util,
              "trace": TRACE, "trace_max_len": TRACE_MAX_LEN, "timeline_measured": timeline, "allocator_ops_per_s": ops}
    (out / "kv.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    plot(rows, util, timeline, out / "kv.png")
    print(f"\nwrote {out / 'kv.json'} and {out / 'kv.png'}")


if __name__ == "__main__":
    main()
