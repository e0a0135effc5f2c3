"""Serving 16 concurrent requests: the course engine against one-at-a-time baselines.
Not a test: it prints a table and writes benchmarks/results/serving.json and serving.png.

    python benchmarks/bench_serving.py                 # or: make bench
    python benchmarks/bench_serving.py --threads 2 --new-tokens 64

One torch thread by default, as in bench_decode.py: the tiny model's matrices are too
small to split, and on a machine busy with other work a second intra-op thread spins
and waits (measured here with a load average near 7 on 2 cores: every torch system ran
3 to 25 times slower with 2 threads than with 1).

Four ways to serve the same 16 requests (the first 16 lab prompts, 5 to 20 tokens
long), all arriving at once, greedy, EOS switched off so every request produces exactly
--new-tokens tokens and every system must produce the SAME tokens (checked):

  engine          course.engine.Engine: continuous batching over a paged KV pool,
                  one batched forward per step (course.batched)
  course 1-by-1   the same CourseDecoder, one request after another (prefill + decodes)
  hf generate     transformers' model.generate, one request after another
  hf gen_batch    transformers' continuous batching, model.generate_batch (paged cache),
                  when the installed transformers has it

Every system runs --repeats rounds (default 3) in the same process, after one short
warm-up, in an order rotated each round; the table shows medians, and each ratio is
the median of the ratios measured within one round (a burst of load from another
process then hits both sides of a ratio alike).
TTFT counts from the moment all requests arrived (queueing included); TPOT averages
each request's gaps between tokens. The figures depend on the machine and on what else
it runs; the ratios against peers measured in the same run are what to compare.
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
from course.tiny_model import LAB_PROMPTS, load_tiny_model  # noqa: E402
from course.tracing import percentile  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
clock = time.perf_counter


def summary(name, t0, end, token_times, tokens):
    """One row: throughput over the whole run, TTFT from t0 and TPOT per request."""
    ttft = [times[0] - t0 for times in token_times]
    tpot = [(times[-1] - times[0]) / (len(times) - 1) for times in token_times if len(times) > 1]
    n = sum(len(t) for t in tokens)
    return {"system": name, "tokens": n, "seconds": end - t0, "tokens_per_s": n / (end - t0),
            "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
            "tpot_p50": percentile(tpot, 50), "tpot_p99": percentile(tpot, 99)}


@torch.no_grad()
def run_engine(decoder, prompts, new_tokens, block_size=16):
    blocks = sum(-(-(len(p) + new_tokens) // block_size) for p in prompts) + 1
    engine = Engine(decoder, None, EngineConfig(num_blocks=blocks, block_size=block_size, max_batch=len(prompts),
                                                max_waiting=len(prompts)), clock=clock)
    t0 = clock()
    ids = [engine.add_request(p, RequestParams(temperature=0, max_tokens=new_tokens, ignore_eos=True))
           for p in prompts]
    times = {i: [] for i in ids}
    tokens = {i: [] for i in ids}
    while engine.has_unfinished():
        outs = engine.step()
        now = clock()
        for o in outs:
            tokens[o.request_id] += o.new_token_ids
            times[o.request_id] += [now] * len(o.new_token_ids)
    end = clock()
    return summary("engine", t0, end, [times[i] for i in ids], [tokens[i] for i in ids]), [tokens[i] for i in ids]


@torch.no_grad()
def run_course_sequential(decoder, prompts, new_tokens):
    t0 = clock()
    all_times, all_tokens = [], []
    for p in prompts:
        logits, kv = decoder.prefill(torch.tensor([p], device=decoder.device))
        times, tokens = [], []
        for step in range(new_tokens):
            token = int(logits[0, -1].argmax())
            tokens.append(token)
            times.append(clock())
            if step < new_tokens - 1:
                logits, kv = decoder.decode(torch.tensor([[token]], device=decoder.device), kv)
        kv.release()
        all_times.append(times)
        all_tokens.append(tokens)
    return summary("course 1-by-1", t0, clock(), all_times, all_tokens), all_tokens


class _Stamps:
    """A transformers streamer that only records when each new token arrives."""

    def __init__(self):
        self.times, self.first = [], True

    def put(self, value):
        if self.first:            # generate() first puts the prompt
            self.first = False
            return
        self.times += [clock()] * int(value.numel())

    def end(self):
        pass


@torch.no_grad()
def run_hf_generate(hf, prompts, new_tokens):
    device = next(hf.parameters()).device
    t0 = clock()
    all_times, all_tokens = [], []
    for p in prompts:
        ids = torch.tensor([p], device=device)
        stamps = _Stamps()
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False,
                          eos_token_id=None, pad_token_id=0, streamer=stamps)
        all_tokens.append(out[0, len(p):].tolist())
        all_times.append(stamps.times)
    return summary("hf generate", t0, clock(), all_times, all_tokens), all_tokens


@torch.no_grad()
def run_hf_generate_batch(hf, prompts, new_tokens):
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    gc = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    cb = ContinuousBatchingConfig(page_size=16, num_blocks=256, max_batch_tokens=1024, use_cuda_graph=False)
    t0 = clock()
    out = hf.generate_batch([list(p) for p in prompts], generation_config=gc, continuous_batching_config=cb,
                            record_timestamps=True, warmup=False)
    end = clock()
    rows = [out[f"req_{i}"] for i in range(len(prompts))]
    return (summary("hf gen_batch", t0, end, [list(r.timestamps) for r in rows],
                    [list(r.generated_tokens) for r in rows]), [list(r.generated_tokens) for r in rows])


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["system"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    left.bar(names, [r["tokens_per_s"] for r in rows], color="#4c72b0")
    left.set_ylabel("output tokens / s")
    left.set_title("throughput, 16 concurrent requests")
    x = range(len(rows))
    for k, (key, label) in enumerate((("ttft_p50", "TTFT P50"), ("ttft_p99", "TTFT P99"),
                                      ("tpot_p50", "TPOT P50"), ("tpot_p99", "TPOT P99"))):
        right.bar([i + 0.2 * k - 0.3 for i in x], [r[key] * 1000 for r in rows], width=0.2, label=label)
    right.set_xticks(list(x), names)
    right.set_yscale("log")
    right.set_ylabel("ms (log scale)")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="rounds, each system once per round, order rotated")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    hf, tokenizer = load_tiny_model(args.device)
    decoder = CourseDecoder.from_pretrained(hf)
    prompts = [[int(t) for t in tokenizer.encode(p)] for p in (LAB_PROMPTS * 2)[:args.requests]]

    systems = [("engine", lambda ps, n: run_engine(decoder, ps, n)),
               ("course 1-by-1", lambda ps, n: run_course_sequential(decoder, ps, n)),
               ("hf generate", lambda ps, n: run_hf_generate(hf, ps, n))]
    if hasattr(hf, "generate_batch"):
        systems.append(("hf gen_batch", lambda ps, n: run_hf_generate_batch(hf, ps, n)))
    for _, fn in systems:
        fn(prompts[:2], 4)                                   # warm-up
    rounds, outputs = [], {}
    for k in range(args.repeats):                            # alternate the order: load hits every system alike
        order = systems[k % len(systems):] + systems[:k % len(systems)]
        measured = {}
        for name, fn in order:
            measured[name], outputs[name] = fn(prompts, args.new_tokens)
        rounds.append(measured)
    reference = outputs["course 1-by-1"]
    rows = []
    for name, _ in systems:
        row = {"system": name}
        for key in ("tokens", "seconds", "tokens_per_s", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            row[key] = statistics.median(r[name][key] for r in rounds)
        row["tokens_per_s_each_round"] = [r[name]["tokens_per_s"] for r in rounds]
        row["same_tokens_as_course_1_by_1"] = outputs[name] == reference
        rows.append(row)

    def paired(a, b):   # the median over rounds of the ratio measured within one round
        return statistics.median(r[a]["tokens_per_s"] / r[b]["tokens_per_s"] for r in rounds)
    ratios = {"engine / course 1-by-1": paired("engine", "course 1-by-1"),
              "engine / hf generate": paired("engine", "hf generate")}
    if any(name == "hf gen_batch" for name, _ in systems):
        ratios["engine / hf gen_batch"] = paired("engine", "hf gen_batch")
        ratios["hf gen_batch / hf generate"] = paired("hf gen_batch", "hf generate")

    print(f"{args.requests} requests x {args.new_tokens} tokens, {args.threads} thread(s), {args.device}, "
          f"medians of {args.repeats} rounds; ratios: median of the ratios within each round")
    print(f"{'system':14} {'tokens/s':>9} {'TTFT P50':>9} {'TTFT P99':>9} {'TPOT P50':>9} {'TPOT P99':>9}  same tokens")
    for r in rows:
        print(f"{r['system']:14} {r['tokens_per_s']:9.0f} {1e3 * r['ttft_p50']:7.1f}ms {1e3 * r['ttft_p99']:7.1f}ms "
              f"{1e3 * r['tpot_p50']:7.2f}ms {1e3 * r['tpot_p99']:7.2f}ms  {r['same_tokens_as_course_1_by_1']}")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import transformers
    record = {"requests": args.requests, "new_tokens": args.new_tokens, "threads": args.threads,
              "repeats": args.repeats,
              "device": args.device, "prompt_tokens": [len(p) for p in prompts], "rows": rows, "ratios": ratios,
              "versions": {"python": platform.python_version(), "torch": torch.__version__,
                           "transformers": transformers.__version__},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    (out / "serving.json").write_text(json.dumps(record, indent=2) + "\n")
    plot(rows, out / "serving.png")
    print(f"wrote {out / 'serving.json'} and {out / 'serving.png'}")
    return 0 if all(r["same_tokens_as_course_1_by_1"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
