"""What the HTTP layer costs: the same load through `course.serve` (SSE streaming over
loopback) and straight into the engine, in one run. Not a test: it prints a table and
writes benchmarks/results/http.json and http.png.

    python benchmarks/bench_http.py                     # or: make bench
    python benchmarks/bench_http.py --stream-interval 1 4 --rounds 7
    python benchmarks/bench_http.py --lengths mixed --requests 64 --out http_mixed

Each round sends N requests with at most C in flight (a closed loop: a finished
request is replaced at once), greedy, `ignore_eos` so every request makes exactly the
tokens it asks for: --max-tokens each (--lengths same), or a fixed spread around it
(--lengths mixed), the same list on every path. With the same length for all, the C
requests of a wave start and end in the same step: directly, the engine gets all C
replacements before its next step; over HTTP the client has to build C new requests
at once, and the engine steps a part-empty batch until they arrive. Mixed lengths end
one or two requests at a time, as a real load does. A round runs the direct path, then
each HTTP path followed by the direct path again (direct, A, direct, B, direct, ...),
the HTTP paths in an order that rotates from round to round:

  direct  this process adds requests to an Engine and steps it; timestamps are taken
          when a step returns a request's tokens.
  openai  `python -m course.serve` in a child process (same engine settings, same torch
          threads), driven with the official openai.AsyncOpenAI client, streaming.
  httpx   the same server, driven with raw httpx: SSE lines read and the JSON of each
          event parsed, nothing else (what any HTTP client has to do).
With several --stream-interval values, one server runs per value and each is a pair of
paths (openai and httpx) of its own. Timestamps over HTTP are taken when an event with
text arrives.

TTFT = first token - request sent; TPOT = (last token - first token) / (tokens - 1);
tokens/s = all generated tokens / wall time of the run. Latency percentiles pool
every request of every run; an HTTP/direct ratio compares an HTTP run with the mean of
the two direct runs around it (the machine's speed drifts by tens of percent from
minute to minute on a shared host, and this way a drift hits both sides of the ratio), and the
ratios are reported as their median over rounds with their range. The only hard check:
every run of every path produces the same text for every prompt. The 1-minute load
average is recorded for every round.
Servers are always stopped.
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
# --lengths mixed: request i asks for max_tokens x MIX[i % 7] tokens (mean: max_tokens), so
# requests end at different steps and are replaced one or two at a time, as in a real load.
MIX = (0.25, 1.5, 0.75, 1.75, 0.5, 1.25, 1.0)


def request_lengths(kind: str, n: int, max_tokens: int) -> list[int]:
    """Tokens asked for by each of n requests: all max_tokens ("same"), or spread around
    it ("mixed"); the same list on every path."""
    if kind == "same":
        return [max_tokens] * n
    return [max(2, round(max_tokens * MIX[i % len(MIX)])) for i in range(n)]


def describe_lengths(kind: str, max_tokens: int, lengths: list[int]) -> str:
    """The lengths in a few words, for the printed header and the plot's title."""
    if kind == "same":
        return f"{max_tokens} tokens each"
    return f"{min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / len(lengths):.0f})"


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

def run_direct(engine, tokenizer, prompts: list[str], concurrency: int, lengths: list[int]) -> dict:
    todo = list(enumerate(prompts))
    live: dict[str, dict] = {}
    done: dict[int, dict] = {}
    start = time.perf_counter()
    while todo or live:
        while todo and len(live) < concurrency:
            i, prompt = todo.pop(0)
            ids = tokenizer.encode(prompt, add_special_tokens=False)
            rid = engine.add_request(ids, RequestParams(temperature=0, max_tokens=lengths[i], ignore_eos=True))
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

async def run_http_async(base_url: str, prompts: list[str], concurrency: int, lengths: list[int],
                         client_kind: str = "openai") -> dict:
    """One closed-loop round over HTTP with the openai client or raw httpx; request i
    asks for lengths[i] tokens."""
    todo = list(enumerate(prompts))
    done: dict[int, dict] = {}
    body = {"model": MODEL_NAME, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}

    if client_kind == "openai":
        import openai

        client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)

        async def events(prompt: str, max_tokens: int):
            """(text or None, completion tokens or None) per event."""
            stream = await client.completions.create(prompt=prompt, max_tokens=max_tokens,
                                                     extra_body={"ignore_eos": True}, **body)
            async for chunk in stream:
                yield "".join(c.text for c in chunk.choices), chunk.usage and chunk.usage.completion_tokens
        close = client.close
    else:
        import httpx

        client = httpx.AsyncClient(base_url=base_url, timeout=120,
                                   limits=httpx.Limits(max_connections=concurrency))

        async def events(prompt: str, max_tokens: int):
            async with client.stream("POST", "/completions", json={**body, "prompt": prompt, "max_tokens": max_tokens,
                                                                   "ignore_eos": True}) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        yield ("".join(c["text"] for c in chunk["choices"]),
                               (chunk.get("usage") or {}).get("completion_tokens"))
        close = client.aclose

    async def worker():
        while todo:
            i, prompt = todo.pop(0)
            sent = time.perf_counter()
            first = last = None
            text, tokens = [], None
            async for piece, usage in events(prompt, lengths[i]):
                now = time.perf_counter()
                if usage is not None:
                    tokens = usage
                if piece:
                    first = first or now
                    last = now
                    text.append(piece)
            done[i] = {**per_request(sent, first, last, tokens), "text": "".join(text)}

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await close()
    return {"wall_s": wall, "requests": [done[i] for i in range(len(prompts))]}


def start_server(args, stream_interval: int, engine: str) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "course.serve", "--port", "0", "--log-level", "warning",
           "--threads", str(args.threads), "--max-batch", str(args.max_batch),
           "--num-blocks", str(args.num_blocks), "--max-waiting", str(args.requests),
           "--stream-interval", str(stream_interval), "--engine", engine]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:                       # "Serving tiny-model at http://127.0.0.1:PORT/v1 ..."
        if line.startswith("Serving"):
            return proc, line.split(" at ")[1].split()[0]
    proc.wait()
    raise RuntimeError(f"the server exited with {proc.returncode} before printing its URL")


# ---------------------------------------------------------------- CPU accounting

def cpu_seconds(pid: int | None) -> dict:
    """CPU seconds (user + system) used so far by this process ("bench": the client on
    an HTTP path, the engine itself on the direct one) and by the server `pid`
    ("server": its main process, the HTTP front end and, with --engine thread, the
    engine; "server_children": its engine process, with --engine process)."""
    import psutil

    own = psutil.Process().cpu_times()
    out = {"bench": own.user + own.system}
    if pid is not None:
        server = psutil.Process(pid)
        out["server"] = sum(server.cpu_times()[:2])
        out["server_children"] = sum(sum(c.cpu_times()[:2]) for c in server.children(recursive=True))
    return out


# ---------------------------------------------------------------- report

def round_stats(rd: dict) -> dict:
    ttft = [1000 * r["ttft"] for r in rd["requests"]]
    tpot = [1000 * r["tpot"] for r in rd["requests"] if r["tpot"] is not None]
    tokens = sum(r["tokens"] for r in rd["requests"])
    out = {"ttft_p50_ms": percentile(ttft, 50), "ttft_p99_ms": percentile(ttft, 99),
           "tpot_p50_ms": percentile(tpot, 50), "tpot_p99_ms": percentile(tpot, 99),
           "tokens_per_s": tokens / rd["wall_s"]}
    for who, seconds in rd.get("cpu_s", {}).items():     # CPU ms per generated token, by process
        out[f"cpu_ms_per_token_{who}"] = 1000 * seconds / tokens
    if "cpu_s" in rd:                                     # cores busy on average over the round
        out["cores_busy"] = sum(rd["cpu_s"].values()) / rd["wall_s"]
    return out


def summary(rounds: list[dict]) -> dict:
    """Percentiles over every request of every round; tokens/s: median over rounds."""
    pooled = round_stats({"requests": [r for rd in rounds for r in rd["requests"]], "wall_s": 1.0})
    per_round = [round_stats(rd) for rd in rounds]
    for k in per_round[0]:
        if k == "tokens_per_s" or k.startswith("cpu_") or k == "cores_busy":
            pooled[k] = statistics.median(s[k] for s in per_round)
    return {**pooled, "rounds": per_round, "requests": sum(len(rd["requests"]) for rd in rounds)}


def paired_ratios(direct: dict, http: dict, neighbours: list[tuple[int, int]]) -> dict:
    """HTTP / direct for each statistic: for each HTTP round, the ratio to the mean of the
    two direct runs just before and just after it (neighbours: their indices in
    direct["rounds"]), so a drift in the machine's speed hits both sides of a ratio
    alike; the median over rounds, with the smallest and largest."""
    out = {}

    def pairs():
        for (a, b), h in zip(neighbours, http["rounds"]):
            d1, d2 = direct["rounds"][a], direct["rounds"][b]
            yield {k: (d1[k] + d2[k]) / 2 for k in d1}, h
    for k in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "tokens_per_s"):
        xs = [h[k] / d[k] for d, h in pairs()]
        out[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    # What the CPU account allows with two cores free for this work alone: each process
    # on at most one core (the server's threads share one interpreter lock), all of them
    # on two; the direct path on one core. An estimate from CPU time, not a measurement.
    xs = []
    for d, h in pairs():
        cpu = [v for k, v in h.items() if k.startswith("cpu_ms") and v > 0]
        if cpu:
            xs.append(d["cpu_ms_per_token_bench"] / max(max(cpu), sum(cpu) / 2))
    if xs:
        out["tokens_per_s_bound_2_free_cores"] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    # the target on time to first token: HTTP <= 1.5 x direct + 5 ms, per round
    xs = [h["ttft_p50_ms"] - (1.5 * d["ttft_p50_ms"] + 5) for d, h in pairs()]
    out["ttft_p50_over_target_ms"] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    return out


def plot(direct: dict, paths: dict, ratios: dict, path: Path, title: str) -> None:
    """Left: latency per request on every path. Right: tokens/s over HTTP / direct, the
    median over rounds with the smallest and largest round, against the target."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _plots import plain_log_axis

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    labels = ["TTFT P50", "TTFT P99", "TPOT P50", "TPOT P99"]
    keys = ["ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"]
    series = {"engine directly": direct, **paths}
    width = 0.8 / len(series)
    for j, (name, s) in enumerate(series.items()):
        a.bar([i + (j - (len(series) - 1) / 2) * width for i in range(len(labels))], [s[k] for k in keys], width,
              label=name, color=f"C{j}")
    a.set_xticks(list(range(len(labels))), labels)
    a.set_ylabel("ms")
    a.set_yscale("log")
    plain_log_axis(a.yaxis)                                                     # 2, 5, 10, not 2 x 10^0
    a.legend(fontsize=7)
    a.set_title("latency per request (pooled)")
    names = list(paths)
    med = [ratios[n]["tokens_per_s"]["median"] for n in names]
    lo = [m - ratios[n]["tokens_per_s"]["min"] for m, n in zip(med, names)]
    hi = [ratios[n]["tokens_per_s"]["max"] - m for m, n in zip(med, names)]
    b.bar(range(len(names)), med, yerr=[lo, hi], capsize=4, color=[f"C{j + 1}" for j in range(len(names))])
    b.axhline(0.85, color="k", linestyle="--", linewidth=1)
    b.text(1.01, 0.85, "target\n0.85", transform=b.get_yaxis_transform(), ha="left", va="center", fontsize=7)
    b.axhline(1.0, color="0.6", linewidth=0.8)
    b.set_xticks(list(range(len(names))), [n.replace(", stream-interval ", "\ninterval ").replace(", engine ", "\n")
                                           for n in names], fontsize=7)
    b.set_ylabel("tokens/s over HTTP / direct")
    b.set_title("throughput, paired (median, min-max over rounds)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=32, help="requests per round (N)")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (C)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per request (the mean with --lengths mixed)")
    ap.add_argument("--lengths", choices=["same", "mixed"], default="same",
                    help="same: every request makes --max-tokens tokens, so a wave of C requests starts "
                         "and ends together; mixed: request i makes max-tokens x "
                         + "/".join(f"{f:g}" for f in MIX) + "[i %% 7], so requests end one or two at a time")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds; each HTTP path runs once per round, the direct path before and after each")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--num-blocks", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stream-interval", type=int, nargs="+", default=[1],
                    help="the server's --stream-interval; one server per value")
    ap.add_argument("--clients", nargs="+", default=["openai", "httpx"], choices=["openai", "httpx"])
    ap.add_argument("--engine", nargs="+", default=["process"], choices=["process", "thread"],
                    help="the server's --engine (where its engine runs); one server per value")
    ap.add_argument("--out", default="http", help="file stem under benchmarks/results/")
    ap.add_argument("--replot", action="store_true", help="only redraw results/OUT.png from results/OUT.json")
    args = ap.parse_args()
    if args.replot:
        plot_result(json.loads((RESULTS / f"{args.out}.json").read_text()), RESULTS / f"{args.out}.png")
        return
    torch.set_num_threads(args.threads)
    prompts = [LAB_PROMPTS[i % len(LAB_PROMPTS)] for i in range(args.requests)]
    lengths = request_lengths(args.lengths, args.requests, args.max_tokens)
    each = describe_lengths(args.lengths, args.max_tokens, lengths)

    engine, tokenizer, _ = tiny_engine(num_blocks=args.num_blocks, max_batch=args.max_batch,
                                       max_waiting=args.requests)
    assert isinstance(engine.config, EngineConfig)
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    kinds = [(e, k) for e in args.engine for k in args.stream_interval]

    def server_name(e: str, k: int) -> str:
        return f"stream-interval {k}" + (f", engine {e}" if len(args.engine) > 1 else "")
    names = ["direct"] + [f"{c}, {server_name(e, k)}" for e, k in kinds for c in args.clients]
    rounds: dict[str, list] = {name: [] for name in names}
    neighbours: dict[str, list] = {name: [] for name in names[1:]}   # direct runs around each HTTP round
    loads = []
    try:
        for e, k in kinds:
            servers[server_name(e, k)] = start_server(args, k, e)

        def run(name: str, prompts: list[str], lengths: list[int]) -> dict:
            server = None if name == "direct" else servers[name.split(", ", 1)[1]]
            before = cpu_seconds(server and server[0].pid)
            if server is None:
                rd = run_direct(engine, tokenizer, prompts, args.concurrency, lengths)
                rd["cpu_s"] = {"bench": cpu_seconds(None)["bench"] - before["bench"]}
                return rd
            rd = asyncio.run(run_http_async(server[1], prompts, args.concurrency, lengths,
                                            name.split(", ")[0]))
            after = cpu_seconds(server[0].pid)
            rd["cpu_s"] = {who: after[who] - before[who] for who in after}
            return rd

        for name in names:           # one small warm-up on each path (first forward, first connection)
            run(name, prompts[:args.concurrency], [4] * args.concurrency)
        http = names[1:]
        for r in range(args.rounds):    # direct, HTTP path, direct, HTTP path, ..., direct
            order = http[r % len(http):] + http[:r % len(http)]
            loads.append(round(os.getloadavg()[0], 2))
            rounds["direct"].append(run("direct", prompts, lengths))
            for name in order:
                rounds[name].append(run(name, prompts, lengths))
                rounds["direct"].append(run("direct", prompts, lengths))
                neighbours[name].append((len(rounds["direct"]) - 2, len(rounds["direct"]) - 1))
        loads.append(round(os.getloadavg()[0], 2))
    finally:
        for proc, _ in servers.values():
            stop(proc)

    for name in names:
        for h in rounds[name]:
            for i, (a, b) in enumerate(zip(rounds["direct"][0]["requests"], h["requests"])):
                assert a["text"] == b["text"], f"prompt {i}: the engine said {a['text']!r}, {name} {b['text']!r}"
                assert a["tokens"] == b["tokens"] == lengths[i]

    stats = {name: summary(rounds[name]) for name in names}
    ratios = {name: paired_ratios(stats["direct"], stats[name], neighbours[name]) for name in names[1:]}
    print(f"N={args.requests} requests x {args.rounds} rounds per HTTP path ({len(rounds['direct'])} direct runs), "
          f"concurrency {args.concurrency}, "
          f"{each} (ignore_eos), greedy, torch threads {args.threads}, "
          f"1-min load average {min(loads)}-{max(loads)}")
    w = max(len(n) for n in names)
    print(f"{'':>{w}} | {'TTFT P50':>9} | {'TTFT P99':>9} | {'TPOT P50':>9} | {'TPOT P99':>9} | {'tokens/s':>9}")
    for name in names:
        s = stats[name]
        print(f"{name:>{w}} | {s['ttft_p50_ms']:7.2f}ms | {s['ttft_p99_ms']:7.2f}ms | {s['tpot_p50_ms']:7.2f}ms | "
              f"{s['tpot_p99_ms']:7.2f}ms | {s['tokens_per_s']:9.0f}")
    print("CPU ms per generated token by process (median round): bench = this process (the engine on the "
          "direct path, the client over HTTP), server = its main process, server_children = its engine process; "
          "cores = all of them / wall time")
    for name in names:
        s = stats[name]
        cpu = ", ".join(f"{k[len('cpu_ms_per_token_'):]} {v:.3f}" for k, v in s.items() if k.startswith("cpu_ms"))
        print(f"{name:>{w}} | {cpu} | cores {s['cores_busy']:.2f}")
    print("HTTP / direct, median [min-max] over rounds of the ratio to the mean of the direct runs just before "
          "and after:")
    for name in names[1:]:
        q = ratios[name]
        cell = lambda k: f"{q[k]['median']:.2f}x [{q[k]['min']:.2f}-{q[k]['max']:.2f}]"  # noqa: E731
        t = q["ttft_p50_over_target_ms"]
        bound = f" (CPU bound on 2 free cores {cell('tokens_per_s_bound_2_free_cores')})" if (
            "tokens_per_s_bound_2_free_cores" in q) else ""
        print(f"{name:>{w}} | tokens/s {cell('tokens_per_s')}{bound} (target >= 0.85) | TTFT P50 {cell('ttft_p50_ms')}, "
              f"{t['median']:+.1f} ms [{t['min']:+.1f}, {t['max']:+.1f}] from 1.5 x direct + 5 ms (target <= 0)")
    print("texts identical on every path for every request")

    import openai
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"torch": torch.__version__, "openai": openai.__version__, "machine": platform.machine(),
              "cpu_count": os.cpu_count(), "device": str(getattr(engine.model, "device", "cpu")),
              "threads": args.threads, "requests": args.requests, "concurrency": args.concurrency,
              "max_tokens": args.max_tokens, "lengths": args.lengths, "tokens_per_request": lengths,
              "rounds": args.rounds, "direct_runs": len(rounds["direct"]), "max_batch": args.max_batch,
              "num_blocks": args.num_blocks, "stream_intervals": args.stream_interval,
              "load_average_1min": {"each_round": loads[:-1], "end": loads[-1]},
              "paths": stats, "http_over_direct": ratios}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_result(result, RESULTS / f"{args.out}.png")
    print(f"wrote {RESULTS / (args.out + '.json')} and {RESULTS / (args.out + '.png')}")


def plot_result(result: dict, path: Path) -> None:
    """The PNG of a result as written to its JSON (also: --replot)."""
    each = describe_lengths(result["lengths"], result["max_tokens"], result["tokens_per_request"])
    loads = result["load_average_1min"]["each_round"] + [result["load_average_1min"]["end"]]
    paths = dict(result["paths"])
    direct = paths.pop("direct")
    plot(direct, paths, result["http_over_direct"], path,
         f"{result['requests']} requests x {result['rounds']} rounds, concurrency {result['concurrency']}, "
         f"{each}, tiny model, {result['device']}, load {min(loads)}-{max(loads)}")


if __name__ == "__main__":
    main()
