"""GPU checks of the paged KV cache (lab05), as one short script for a machine with CUDA.

    python benchmarks/gpu_checks.py                 # prints figures; skips without CUDA
    python benchmarks/gpu_checks.py --out DIR       # also writes DIR/gpu_kv.json
    python benchmarks/gpu_checks.py --device cpu    # a dry run of every path on the CPU

1. The pool on the device: KVPool.bytes_total() against the formula, and against what
   torch.cuda.memory_allocated() grew by when the pool was made.
2. 100 failing requests (a failure injected after the prefill or at a decode step, each
   released in `finally`): free blocks and torch.cuda.memory_allocated() before and after.
3. Per-token decode time, PagedKVCache against StaticKVCache, at contexts 128 .. 4096, on
   a decoder of the tiny model's shape and one of GPT-2 small's shape (random weights,
   n_positions 4096; timing does not need trained weights). Paired and alternating;
   the ratio is the median of per-repeat ratios paged / static.
Exit status 1 when a memory check fails; timings are printed, never asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from course.decoder import CourseDecoder, DecoderConfig  # noqa: E402
from course.kv_cache import StaticKVCache  # noqa: E402
from course.paged_kv import KVPool, PagedKVCache, blocks_needed, kv_bytes_per_token  # noqa: E402
from course.tiny_model import TINY_MODEL_DIR  # noqa: E402

CONTEXTS = (128, 256, 512, 1024, 2048, 4096)
STEPS, BLOCK = 8, 16


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def allocated(device):
    sync(device)
    return torch.cuda.memory_allocated() if device.type == "cuda" else 0


def check_pool(decoder, device):
    before = allocated(device)
    pool = KVPool.for_decoder(decoder, num_blocks=256, block_size=BLOCK)
    grew = allocated(device) - before
    c = decoder.config
    formula = 256 * BLOCK * kv_bytes_per_token(c.n_layer, c.n_head, c.head_dim, 4)
    ok = pool.bytes_total() == formula and (device.type != "cuda" or grew == formula)
    print(f"pool on {pool.device}: bytes_total {pool.bytes_total():,}, formula {formula:,}, "
          f"memory_allocated grew by {grew:,} -> {'OK' if ok else 'MISMATCH'}")
    return pool, {"bytes_total": pool.bytes_total(), "formula": formula, "allocated_growth": grew, "ok": ok}


def check_failing_requests(decoder, pool, device):
    ids = torch.randint(0, decoder.config.vocab_size, (1, 37), device=device,
                        generator=torch.Generator(device=device).manual_seed(0))
    for _ in range(3):                 # warm the allocator's caches before the baseline
        kv = PagedKVCache(pool)
        decoder.prefill(ids, kv=kv)
        kv.release()
    baseline, free_before = allocated(device), pool.allocator.num_free
    for i in range(100):
        kv = PagedKVCache(pool)
        try:
            logits, kv = decoder.prefill(ids, kv=kv)
            for step in range(i % 5):
                logits, kv = decoder.decode(logits[:, -1:].argmax(-1), kv)
            raise RuntimeError(f"injected failure at step {i % 5}")
        except RuntimeError:
            pass
        finally:
            kv.release()
        del logits
    after = allocated(device)
    ok = pool.allocator.num_free == free_before and (device.type != "cuda" or after == baseline)
    print(f"100 failing requests: free blocks {free_before} -> {pool.allocator.num_free}, "
          f"memory_allocated {baseline:,} -> {after:,} -> {'OK' if ok else 'LEAK'}")
    return {"free_before": free_before, "free_after": pool.allocator.num_free, "allocated_before": baseline,
            "allocated_after": after, "ok": ok}


def decode_seconds(decoder, ids, kv, context, device):
    decoder.prefill(ids[:, : context - STEPS], kv=kv)
    sync(device)
    t0 = time.perf_counter()
    for i in range(context - STEPS, context):
        logits, kv = decoder.decode(ids[:, i:i + 1], kv)
    logits[0, -1].argmax().item()
    seconds = (time.perf_counter() - t0) / STEPS
    kv.release()
    return seconds


def time_decode(name, cfg, device, repeats):
    torch.manual_seed(0)
    decoder = CourseDecoder(cfg).to(device).eval()
    c = decoder.config
    ids = torch.randint(0, c.vocab_size, (1, max(CONTEXTS)), device=device)
    pool = KVPool.for_decoder(decoder, num_blocks=blocks_needed(max(CONTEXTS), BLOCK), block_size=BLOCK)

    def make(kind, ctx):
        return PagedKVCache(pool) if kind == "paged" else \
            StaticKVCache(c.n_layer, 1, c.n_head, ctx, c.head_dim, device=device)

    a = decoder.prefill(ids[:, :300], kv=make("static", 300))[0]
    b, kv = decoder.prefill(ids[:, :300], kv=make("paged", 300))
    kv.release()
    same = torch.equal(a.argmax(-1), b.argmax(-1))
    times = {ctx: {"static": [], "paged": []} for ctx in CONTEXTS}
    for ctx in CONTEXTS:
        for kind in ("static", "paged"):
            decode_seconds(decoder, ids, make(kind, ctx), ctx, device)        # warm-up
    for r in range(repeats):
        for ctx in CONTEXTS:
            for kind in (("static", "paged") if r % 2 == 0 else ("paged", "static")):
                times[ctx][kind].append(decode_seconds(decoder, ids, make(kind, ctx), ctx, device))
    rows = []
    print(f"\n{name} (n_layer {c.n_layer}, n_head {c.n_head}, width {c.n_embd}) on {device}, same tokens: {same}")
    print(f"{'context':>8} {'static ms':>10} {'paged ms':>9} {'paged/static':>13}")
    for ctx in CONTEXTS:
        s, p = times[ctx]["static"], times[ctx]["paged"]
        row = {"context": ctx, "static_ms": 1e3 * statistics.median(s), "paged_ms": 1e3 * statistics.median(p),
               "ratio": statistics.median(x / y for x, y in zip(p, s))}
        rows.append(row)
        print(f"{ctx:>8} {row['static_ms']:>10.3f} {row['paged_ms']:>9.3f} {row['ratio']:>13.2f}")
    return {"model": name, "same_tokens": same, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("skip: CUDA is not available (torch.cuda.is_available() is False)")
        return 0
    device = torch.device(args.device)
    torch.set_grad_enabled(False)
    if device.type == "cpu":
        torch.set_num_threads(1)
    else:
        print(torch.cuda.get_device_name(device))
    tiny = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device=device)
    pool, pool_fig = check_pool(tiny, device)
    leak_fig = check_failing_requests(tiny, pool, device)
    shapes = [("tiny-model shape", DecoderConfig(vocab_size=810, n_positions=4096, n_embd=128, n_layer=4, n_head=4)),
              ("GPT-2 small shape", DecoderConfig(vocab_size=50257, n_positions=4096, n_embd=768, n_layer=12,
                                                  n_head=12))]
    decode = [time_decode(name, cfg, device, args.repeats) for name, cfg in shapes]
    record = {"device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
              "torch": torch.__version__, "pool": pool_fig, "failing_requests": leak_fig, "decode": decode}
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_kv.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0 if pool_fig["ok"] and leak_fig["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
