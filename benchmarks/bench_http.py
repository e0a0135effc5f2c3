"""What the HTTP layer costs: the same load through `course.serve` (OpenAI client,
SSE streaming, loopback) and straight into the engine, in one run. Not a test: it
prints a table and writes benchmarks/results/http.json and http.png.

    python benchmarks/bench_http.py                     # or: make bench
    python benchmarks/bench_http.py --requests 64 --concurrency 8 --max-tokens 64

Each round sends N requests with at most C in flight (a closed loop: a finished
request is replaced at once), greedy, `ignore_eos` so every request makes exactly
--max-tokens tokens. The two paths take turns, round after round:

  direct  this process adds requests to an Engine and steps it; timestamps are taken
          when a step returns a request's tokens.
  http    `python -m course.serve` in a child process (same engine settings, same
          torch threads); this process drives it with openai.AsyncOpenAI, streaming;
          timestamps are taken when a chunk with text arrives.

TTFT = first token - request sent; TPOT = (last token - first token) / (tokens - 1);
tokens/s = all generated tokens / wall time of the round. Latency percentiles pool
every request of every round; the HTTP/direct ratios are the median over rounds of the
ratio within a round. The only hard check: both paths produce the same text for every
prompt. The server is always stopped.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from course.engine import EngineConfig, RequestParams  # noqa: E402
from course.serve import MODEL_NAME, tiny_engine  # noqa: E402
from course.tiny_model import LAB_PROMPTS  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def per_request(sent: float, first: float, last: float, tokens: int) -> dict:
    return {"ttft": first - sent, "tpot": (last - first) / (tokens - 1) if tokens > 1 else None,
            "tokens": tokens}


# ---------------------------------------------------------------- direct

def run_direct(engine, tokenizer, prompts: list[str], concurrency: int, max_tokens: int) -> dict:
    params = RequestParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    todo = list(enumerate(prompts))
    live: dict[str, dict] = {}
    done: dict[int, dict] = {}
    start = time.perf_counter()
    while todo or live:
        while todo and len(live) < concurrency:
            i, prompt = todo.pop(0)
            ids = tokenizer.encode(prompt, add_special_tokens=False)
            rid = engine.add_request(ids, params)
            live[rid] = {"i": i, "sent": time.perf_counter(), "first": None, "last": None, "n": 0, "text": []}
        outputs = engine.step()
        now = time.perf_counter()
        for out in outputs:
            r = live[out.request_id]
            if out.new_token_ids:
                r["first"] = r["first"] or now
                r["last"] = now
                r["n"] += len(out.new_token_ids)
            r["text"].append(out.text_delta)
            if out.finish_reason is not None:
                del live[out.request_id]
                done[r["i"]] = {**per_request(r["sent"], r["first"], r["last"], r["n"]), "text": "".join(r["text"])}
    wall = time.perf_counter() - start
    return {"wall_s": wall, "requests": [done[i] for i in range(len(prompts))]}


# ---------------------------------------------------------------- http

async def run_http_async(base_url: str, prompts: list[str], concurrency: int, max_tokens: int) -> dict:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
    todo = list(enumerate(prompts))
    done: dict[int, dict] = {}

    async def worker():
        while todo:
            i, prompt = todo.pop(0)
            sent = time.perf_counter()
            first = last = None
            text, tokens = [], None
            stream = await client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=max_tokens,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True},
                                                     extra_body={"ignore_eos": True})
            async for chunk in stream:
                now = time.perf_counter()
                if chunk.usage is not None:
                    tokens = chunk.usage.completion_tokens
                for c in chunk.choices:
                    if c.text:
                        first = first or now
                        last = now
                        text.append(c.text)
            done[i] = {**per_request(sent, first, last, tokens), "text": "".join(text)}

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await client.close()
    return {"wall_s": wall, "requests": [done[i] for i in range(len(prompts))]}


def start_server(args) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "course.serve", "--port", "0", "--log-level", "warning",
           "--threads", str(args.threads), "--max-batch", str(args.max_batch),
           "--num-blocks", str(args.num_blocks), "--max-waiting", str(args.requests)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:                       # "Serving tiny-model at http://127.0.0.1:PORT/v1 ..."
        if line.startswith("Serving"):
            return proc, line.split(" at ")[1].split()[0]
    proc.wait()
    raise RuntimeError(f"the server exited with {proc.returncode} before printing its URL")


# ---------------------------------------------------------------- report

def round_stats(rd: dict) -> dict:
    ttft = [1000 * r["ttft"] for r in rd["requests"]]
    tpot = [1000 * r["tpot"] for r in rd["requests"] if r["tpot"] is not None]
    return {"ttft_p50_ms": percentile(ttft, 50), "ttft_p99_ms": percentile(ttft, 99),
            "tpot_p50_ms": percentile(tpot, 50), "tpot_p99_ms": percentile(tpot, 99),
            "tokens_per_s": sum(r["tokens"] for r in rd["requests"]) / rd["wall_s"]}


def summary(rounds: list[dict]) -> dict:
    """Percentiles over every request of every round; tokens/s: median over rounds."""
    pooled = round_stats({"requests": [r for rd in rounds for r in rd["requests"]], "wall_s": 1.0})
    per_round = [round_stats(rd) for rd in rounds]
    pooled["tokens_per_s"] = statistics.median(s["tokens_per_s"] for s in per_round)
    return {**pooled, "rounds": per_round, "requests": sum(len(rd["requests"]) for rd in rounds)}


def paired_ratios(direct: dict, http: dict) -> dict:
    """HTTP / direct for each statistic: the median over rounds of the ratio within a
    round (the two runs of a round are back to back, so a burst of load from another
    process tends to hit both)."""
    return {k: statistics.median(h[k] / d[k] for d, h in zip(direct["rounds"], http["rounds"]))
            for k in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "tokens_per_s")}


def plot(direct: dict, http: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [2, 1]})
    labels = ["TTFT P50", "TTFT P99", "TPOT P50", "TPOT P99"]
    keys = ["ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"]
    x = range(len(labels))
    a.bar([i - 0.2 for i in x], [direct[k] for k in keys], 0.4, label="engine directly")
    a.bar([i + 0.2 for i in x], [http[k] for k in keys], 0.4, label="over HTTP (course.serve)")
    a.set_xticks(list(x), labels)
    a.set_ylabel("ms")
    a.set_yscale("log")
    a.legend()
    a.set_title("latency per request")
    b.bar(["direct", "HTTP"], [direct["tokens_per_s"], http["tokens_per_s"]], color=["C0", "C1"])
    b.set_ylabel("generated tokens / s")
    b.set_title("throughput")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=32, help="requests per round (N)")
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight (C)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per path, alternating")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--num-blocks", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="http", help="file stem under benchmarks/results/")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    prompts = [LAB_PROMPTS[i % len(LAB_PROMPTS)] for i in range(args.requests)]

    engine, tokenizer, _ = tiny_engine(num_blocks=args.num_blocks, max_batch=args.max_batch,
                                       max_waiting=args.requests)
    assert isinstance(engine.config, EngineConfig)
    proc, base_url = start_server(args)
    load = {"start": os.getloadavg()[0]}
    try:
        # One small warm-up on each path (first forward, first connection).
        run_direct(engine, tokenizer, prompts[:args.concurrency], args.concurrency, 4)
        asyncio.run(run_http_async(base_url, prompts[:args.concurrency], args.concurrency, 4))
        direct_rounds, http_rounds = [], []
        for _ in range(args.rounds):
            direct_rounds.append(run_direct(engine, tokenizer, prompts, args.concurrency, args.max_tokens))
            http_rounds.append(asyncio.run(run_http_async(base_url, prompts, args.concurrency, args.max_tokens)))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    load["end"] = os.getloadavg()[0]

    for d, h in zip(direct_rounds, http_rounds):
        for i, (a, b) in enumerate(zip(d["requests"], h["requests"])):
            assert a["text"] == b["text"], f"prompt {i}: the engine said {a['text']!r}, the server {b['text']!r}"
            assert a["tokens"] == b["tokens"] == args.max_tokens

    direct, http = summary(direct_rounds), summary(http_rounds)
    ratio = paired_ratios(direct, http)
    print(f"N={args.requests} requests x {args.rounds} rounds per path, concurrency {args.concurrency}, "
          f"{args.max_tokens} tokens each (ignore_eos), greedy, torch threads {args.threads}, "
          f"device {engine.model.device if hasattr(engine.model, 'device') else 'cpu'}")
    print(f"{'':>11} | {'TTFT P50':>9} | {'TTFT P99':>9} | {'TPOT P50':>9} | {'TPOT P99':>9} | {'tokens/s':>9}")
    for name, s in (("direct", direct), ("HTTP", http)):
        print(f"{name:>11} | {s['ttft_p50_ms']:7.2f}ms | {s['ttft_p99_ms']:7.2f}ms | {s['tpot_p50_ms']:7.2f}ms | "
              f"{s['tpot_p99_ms']:7.2f}ms | {s['tokens_per_s']:9.0f}")
    print(f"{'HTTP/direct':>11} | {ratio['ttft_p50_ms']:8.2f}x | {ratio['ttft_p99_ms']:8.2f}x | "
          f"{ratio['tpot_p50_ms']:8.2f}x | {ratio['tpot_p99_ms']:8.2f}x | {ratio['tokens_per_s']:8.2f}x   "
          "(median of per-round ratios)")
    print("texts identical on both paths for every request")

    import openai
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"torch": torch.__version__, "openai": openai.__version__, "machine": platform.machine(),
              "cpu_count": os.cpu_count(), "device": str(getattr(engine.model, "device", "cpu")),
              "threads": args.threads, "requests": args.requests, "concurrency": args.concurrency,
              "max_tokens": args.max_tokens, "rounds": args.rounds, "max_batch": args.max_batch,
              "num_blocks": args.num_blocks, "load_average_1min": load,
              "direct": direct, "http": http, "http_over_direct": ratio}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(direct, http, RESULTS / f"{args.out}.png",
         f"{args.requests} requests x {args.rounds} rounds, concurrency {args.concurrency}, "
         f"{args.max_tokens} tokens each, tiny model, {result['device']}")
    print(f"wrote {RESULTS / (args.out + '.json')} and {RESULTS / (args.out + '.png')}")


if __name__ == "__main__":
    main()
