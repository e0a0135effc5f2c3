"""Serving N concurrent requests: the course engine against transformers' continuous
batching and two one-at-a-time baselines. Not a test: it prints a table and writes
benchmarks/results/serving.json and serving.png (or serving_N.json with --out-stem).

    python benchmarks/bench_serving.py                       # 16 requests, or: make bench
    python benchmarks/bench_serving.py --requests 64 --rounds 7
    python benchmarks/bench_serving.py --systems engine,hf_batch   # only the pair that matters

The workload: --requests DISTINCT prompts (the lab prompts first, then more made from
the same templates; `workload()` below), all arriving at once, greedy, EOS switched off
so every request produces exactly --new-tokens tokens. Every system serves the SAME
requests and must produce the SAME tokens, checked in every round against the course
decoder run on each request alone:

  engine      course.engine.Engine: continuous batching over a paged KV pool, one
              batched forward per step (course.batched); all requests run at once
  course 1x1  the same CourseDecoder, one request after another (prefill + decodes)
  hf 1x1      transformers' model.generate, one request after another
  hf_batch    transformers' continuous batching, model.generate_batch (paged cache, one
              background thread), given the same KV room and a token budget that fits
              every prompt in one step, as the engine has

Three clocks per system and round, because a call's fixed costs are not its speed:
  whole call   from the call (the engine: building it, pool included) to its return;
  start-up     from the call to the first token (prefill of every prompt);
  token phase  from the first token to the last: tokens produced after the first
               token's moment / that time. transformers' generate_batch also spends time
               after its last token (it joins its thread and runs a full garbage
               collection), which the whole call counts and the token phase does not.
CPU seconds per call (time.process_time: every thread of the process) are reported too:
on a machine shared with other jobs they move far less with load than wall time does.
Rounds alternate the order of the systems (A B, then B A, ...) after one warm-up round,
and every ratio is the median over rounds of the ratio measured within a round, shown
with its smallest and largest value. The 1-minute load average is recorded before and
after every round. One torch thread by default (as in bench_decode.py).
"""
from __future__ import annotations

import argparse
import gc
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
BLOCK = 16
clock = time.perf_counter
SYSTEMS = ("engine", "course_1x1", "hf_1x1", "hf_batch")
LABELS = {"engine": "engine", "course_1x1": "course 1-by-1", "hf_1x1": "hf generate 1-by-1",
          "hf_batch": "hf generate_batch"}

CITIES = ("Rome", "Cairo", "Lima", "Dublin", "Madrid", "Vienna", "Prague", "Delhi", "Sydney", "Boston",
          "Denver", "Quito", "Accra", "Hanoi", "Manila", "Athens")


def workload(n: int) -> list[str]:
    """n distinct prompts: the lab prompts, then new ones from the same templates."""
    more = []
    for i, city in enumerate(CITIES):
        more += [f"User: weather in {city}\nCall: ", f"User: time in {city}\nCall: ",
                 f"{i + 3} + {2 * i + 5} =", f"User: remind me in {5 * i + 10} minutes\nCall: "]
    prompts = list(dict.fromkeys(list(LAB_PROMPTS) + more))
    if n > len(prompts):
        raise SystemExit(f"`--requests` must be at most {len(prompts)} (distinct prompts), got {n}.")
    return prompts[:n]


def blocks_for(prompts, new_tokens) -> int:
    return sum(-(-(len(p) + new_tokens) // BLOCK) for p in prompts) + 1


# ---------------------------------------------------------------- the systems
# Each returns (call start, call end, [token times per request], [tokens per request]).

@torch.no_grad()
def run_engine(decoder, prompts, new_tokens):
    t0 = clock()
    engine = Engine(decoder, None, EngineConfig(num_blocks=blocks_for(prompts, new_tokens), block_size=BLOCK,
                                                max_batch=len(prompts), max_waiting=len(prompts)), clock=clock)
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
    return t0, clock(), [times[i] for i in ids], [tokens[i] for i in ids]


@torch.no_grad()
def run_course_sequential(decoder, prompts, new_tokens):
    t0 = clock()
    all_times, all_tokens = [], []
    for p in prompts:
        logits, kv = decoder.prefill(torch.tensor([p], device=decoder.device))
        times, tokens = [], []
        for step in range(new_tokens):
            tokens.append(int(logits[0, -1].argmax()))
            times.append(clock())
            if step < new_tokens - 1:
                logits, kv = decoder.decode(torch.tensor([[tokens[-1]]], device=decoder.device), kv)
        kv.release()
        all_times.append(times)
        all_tokens.append(tokens)
    return t0, clock(), all_times, all_tokens


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
    return t0, clock(), all_times, all_tokens


@torch.no_grad()
def run_hf_generate_batch(hf, prompts, new_tokens):
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    gc_ = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    # The same KV room as the engine and a token budget that prefills every prompt in one step.
    cb = ContinuousBatchingConfig(page_size=BLOCK, num_blocks=blocks_for(prompts, new_tokens),
                                  max_batch_tokens=max(1024, sum(len(p) for p in prompts)),
                                  use_cuda_graph=False)
    t0 = clock()
    out = hf.generate_batch([list(p) for p in prompts], generation_config=gc_, continuous_batching_config=cb,
                            record_timestamps=True, warmup=False)
    end = clock()
    rows = [out[f"req_{i}"] for i in range(len(prompts))]
    return t0, end, [list(r.timestamps) for r in rows], [list(r.generated_tokens) for r in rows]


# ---------------------------------------------------------------- one round's figures

def measure(t0, end, token_times, tokens) -> dict:
    stamps = sorted(t for times in token_times for t in times)
    first, last = stamps[0], stamps[-1]
    after_first = sum(1 for t in stamps if t > first)
    ttft = [times[0] - t0 for times in token_times]
    tpot = [(times[-1] - times[0]) / (len(times) - 1) for times in token_times if len(times) > 1]
    n = len(stamps)
    return {"tokens": n, "call_s": end - t0, "startup_s": first - t0, "token_phase_s": last - first,
            "after_last_token_s": end - last,
            "tokens_per_s_call": n / (end - t0), "tokens_per_s_token_phase": after_first / (last - first),
            "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99),
            "tpot_p50_s": percentile(tpot, 50), "tpot_p99_s": percentile(tpot, 99)}


def spread(xs) -> dict:
    xs = list(xs)
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def plot(record, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _plots import plain_log_axis
    rows = record["systems"]
    names = [LABELS[s] for s in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    x = range(len(rows))
    for k, (key, label) in enumerate((("tokens_per_s_call", "whole call"),
                                      ("tokens_per_s_token_phase", "first to last token"))):
        med = [rows[s][key]["median"] for s in rows]
        lo = [m - rows[s][key]["min"] for m, s in zip(med, rows)]
        hi = [rows[s][key]["max"] - m for m, s in zip(med, rows)]
        left.bar([i + 0.4 * k - 0.2 for i in x], med, width=0.4, yerr=[lo, hi], capsize=3, label=label)
    left.set_xticks(list(x), names)
    left.set_ylabel("output tokens / s (median, min-max)")
    left.set_title(f"throughput, {record['requests']} concurrent requests x {record['new_tokens']} tokens")
    left.legend(fontsize=8)
    for k, (key, label) in enumerate((("startup_s", "start-up (to first token)"),
                                      ("token_phase_s", "first to last token"),
                                      ("after_last_token_s", "after the last token"))):
        right.bar([i + 0.27 * k - 0.27 for i in x], [1000 * rows[s][key]["median"] for s in rows], width=0.27,
                  label=label)
    right.set_xticks(list(x), names)
    right.set_yscale("log")
    plain_log_axis(right.yaxis, subs=(1.0,))                    # 0.01 ... 1000, not 10^-2
    right.set_ylabel("ms (median, log scale)")
    right.set_title("where a call's time goes")
    # under the plot: inside it, the legend covered the engine's bars
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"tiny model, {record['device']}, {record['threads']} thread(s), {record['rounds']} paired rounds; "
                 f"1-min load average {record['load_average_1min']['min']:.1f}-"
                 f"{record['load_average_1min']['max']:.1f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=7, help="paired rounds after one warm-up round")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {','.join(SYSTEMS)}")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--out-stem", default="serving")
    ap.add_argument("--replot", action="store_true", help="only redraw OUT/STEM.png from OUT/STEM.json")
    args = ap.parse_args(argv)
    if args.replot:
        saved = Path(args.out) / f"{args.out_stem}.json"
        plot(json.loads(saved.read_text(encoding="utf-8")), saved.with_suffix(".png"))
        print(f"wrote {saved.with_suffix('.png')}")
        return 0
    systems = [s for s in args.systems.split(",") if s]
    if not systems or any(s not in SYSTEMS for s in systems):
        ap.error(f"`--systems` must name some of {','.join(SYSTEMS)}, got {args.systems!r}.")
    for name in ("threads", "new_tokens", "requests", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"`--{name.replace('_', '-')}` must be an integer >= 1, got {getattr(args, name)}.")
    torch.set_num_threads(args.threads)
    hf, tokenizer = load_tiny_model(args.device)
    decoder = CourseDecoder.from_pretrained(hf)
    texts = workload(args.requests)
    prompts = [[int(t) for t in tokenizer.encode(p)] for p in texts]
    if "hf_batch" in systems and not hasattr(hf, "generate_batch"):
        print("this transformers has no generate_batch: hf_batch skipped", file=sys.stderr)
        systems.remove("hf_batch")
    run = {"engine": lambda: run_engine(decoder, prompts, args.new_tokens),
           "course_1x1": lambda: run_course_sequential(decoder, prompts, args.new_tokens),
           "hf_1x1": lambda: run_hf_generate(hf, prompts, args.new_tokens),
           "hf_batch": lambda: run_hf_generate_batch(hf, prompts, args.new_tokens)}

    # The expected tokens: each request alone through the course decoder, computed once.
    expected = run_course_sequential(decoder, prompts, args.new_tokens)[3]
    for s in systems:                                        # warm-up round, not counted
        run[s]()
    rounds, loads = [], []
    for k in range(args.rounds):
        order = systems if k % 2 == 0 else systems[::-1]     # A B C D, then D C B A, ...
        before = os.getloadavg()[0]
        measured = {}
        for s in order:
            gc.collect()                                     # nobody pays for the previous system's garbage
            cpu = time.process_time()
            t0, end, token_times, tokens = run[s]()
            cpu = time.process_time() - cpu                  # CPU seconds of every thread of this process
            if tokens != expected:
                bad = [i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b]
                raise SystemExit(f"round {k}: {s} produced other tokens than each request alone "
                                 f"(requests {bad[:10]})")
            measured[s] = {**measure(t0, end, token_times, tokens), "cpu_s_call": cpu}
        loads.append((before, os.getloadavg()[0]))
        rounds.append(measured)
        print(f"round {k + 1}/{args.rounds} (load {before:.1f}): "
              + ", ".join(f"{s} {measured[s]['tokens_per_s_token_phase']:.0f}/{measured[s]['tokens_per_s_call']:.0f}"
                          for s in systems) + " tok/s (token phase / call)", file=sys.stderr)

    keys = ("tokens_per_s_call", "tokens_per_s_token_phase", "call_s", "cpu_s_call", "startup_s", "token_phase_s",
            "after_last_token_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
    table = {s: {key: spread(r[s][key] for r in rounds) for key in keys} for s in systems}
    ratios = {}
    for other in systems[1:] if systems[0] == "engine" else []:
        for key, label in (("tokens_per_s_call", "whole call"), ("tokens_per_s_token_phase", "token phase")):
            ratios[f"engine / {other}, {label}"] = spread(r["engine"][key] / r[other][key] for r in rounds)
        ratios[f"{other} / engine, CPU seconds per call"] = spread(r[other]["cpu_s_call"] / r["engine"]["cpu_s_call"]
                                                                   for r in rounds)
    flat = [x for pair in loads for x in pair]

    print(f"\n{args.requests} requests ({len(set(texts))} distinct prompts, {min(map(len, prompts))}-"
          f"{max(map(len, prompts))} tokens) x {args.new_tokens} new tokens, all at once, greedy; "
          f"{args.threads} thread(s), {args.device}; {args.rounds} paired rounds, median [min-max]; "
          f"tokens equal to each request alone in every round; 1-min load average {min(flat):.1f}-{max(flat):.1f}")
    print(f"{'system':20} {'tok/s call':>20} {'tok/s token phase':>20} {'start-up ms':>12} {'after last ms':>14}"
          f" {'TPOT P50 ms':>12} {'CPU s/call':>11}")
    for s in systems:
        t = table[s]
        print(f"{LABELS[s]:20} {t['tokens_per_s_call']['median']:8.0f} [{t['tokens_per_s_call']['min']:4.0f}-"
              f"{t['tokens_per_s_call']['max']:4.0f}] {t['tokens_per_s_token_phase']['median']:8.0f} "
              f"[{t['tokens_per_s_token_phase']['min']:4.0f}-{t['tokens_per_s_token_phase']['max']:4.0f}] "
              f"{1e3 * t['startup_s']['median']:12.1f} {1e3 * t['after_last_token_s']['median']:14.1f} "
              f"{1e3 * t['tpot_p50_s']['median']:12.2f} {t['cpu_s_call']['median']:11.3f}")
    for name, r in ratios.items():
        print(f"{name}: {r['median']:.2f}x [{r['min']:.2f}-{r['max']:.2f}]")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import transformers
    record = {"requests": args.requests, "distinct_prompts": len(set(texts)), "new_tokens": args.new_tokens,
              "threads": args.threads, "rounds": args.rounds, "device": args.device, "block_size": BLOCK,
              "prompt_tokens": [len(p) for p in prompts], "order": "alternating (forward, then reversed)",
              "tokens_equal_to_solo_every_round": True,
              "load_average_1min": {"each_round": loads, "min": min(flat), "max": max(flat)},
              "systems": table, "ratios": ratios,
              "versions": {"python": platform.python_version(), "torch": torch.__version__,
                           "transformers": transformers.__version__},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    (out / f"{args.out_stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    plot(record, out / f"{args.out_stem}.png")
    print(f"wrote {out / (args.out_stem + '.json')} and {out / (args.out_stem + '.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
