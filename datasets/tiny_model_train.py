"""Train the course's tiny model into datasets/tiny-model.

    python datasets/tiny_model_train.py            # or: make model

What it does, in order:
  1. writes a synthetic corpus (seeded, single-threaded): JSON tool calls
     ("User: weather in Paris\\nCall: " -> {"tool": "get_weather", ...}), short
     sentences and small sums ("12 + 7 = 19"); every sample ends with EOS;
  2. trains a byte-level BPE tokenizer on it with the `tokenizers` library;
  3. trains a 4-layer GPT2LMHeadModel with AdamW on the CPU;
  4. measures how often greedy completions of the lab's tool-call prompts
     (course.tiny_model.LAB_PROMPTS, held out of the corpus) are valid JSON
     ending in EOS, and writes the checkpoint plus a model card (README.md).

Deterministic: fixed seeds, one torch thread (--threads), no dropout; two runs
wrote byte-identical checkpoints. Measured: 431 s for the whole script (405 s of
training, 269 s of it CPU time) on 2 cores shared with other jobs; on an idle
machine it is closer to 5 minutes. Nothing is downloaded.
"""
from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # BPE training on one thread
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from course.quality import EXPECTED  # noqa: E402
from course.tiny_model import LAB_PROMPTS, TOOL_CALL_MARKER, TOOL_CALL_PROMPTS  # noqa: E402

OUT_DIR = REPO / "datasets" / "tiny-model"
EOS = "<|endoftext|>"
SEED = 1234

# ---------------------------------------------------------------- the corpus

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Lisbon", "Oslo", "Cairo",
          "Lima", "Sydney", "Toronto", "Seoul", "Delhi", "Dublin", "Vienna", "Prague", "Athens",
          "Nairobi", "Boston"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD"]
NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi"]
MESSAGES = ["running late", "see you at noon", "call me back", "on my way", "dinner at eight",
            "the meeting moved", "happy birthday", "thanks for the help", "lunch tomorrow",
            "I am home", "back in five minutes", "good luck today"]
COUNTRIES = {"France": "Paris", "England": "London", "Japan": "Tokyo", "Germany": "Berlin",
             "Spain": "Madrid", "Italy": "Rome", "Portugal": "Lisbon", "Norway": "Oslo",
             "Egypt": "Cairo", "Peru": "Lima", "Korea": "Seoul", "Ireland": "Dublin",
             "Austria": "Vienna", "Greece": "Athens", "Kenya": "Nairobi"}
ADJECTIVES = ["small", "big", "tired", "happy", "old", "young", "quiet", "brave", "lazy", "red"]
NOUNS = ["cat", "dog", "bird", "child", "farmer", "teacher", "robot", "fox", "horse", "baker"]
VERBS = ["sleeps", "sits", "waits", "runs", "plays", "reads", "sings", "rests", "hides", "eats"]
PLACES = ["on the mat", "under the table", "in the garden", "by the river", "near the door",
          "in the kitchen", "on the hill", "at the station", "in the park", "behind the house"]


def call(tool: str, **args) -> str:
    return json.dumps({"tool": tool, "args": args})


def tool_call_sample(rng: random.Random) -> tuple[str, str]:
    """One (prompt, JSON completion) pair."""
    kind = rng.choices(range(6), weights=[2.0, 1.5, 1.5, 1.0, 1.5, 1.5])[0]
    if kind == 0:
        city = rng.choice(CITIES)
        if rng.random() < 0.35:
            request = rng.choice(["weather in {c} in fahrenheit", "what's the weather in {c} in fahrenheit",
                                  "how warm is it in {c} in fahrenheit", "forecast for {c} in fahrenheit"])
            unit = "fahrenheit"
        else:
            request = rng.choice(["weather in {c}", "what's the weather in {c}", "how warm is it in {c}",
                                  "forecast for {c}", "weather in {c} in celsius"])
            unit = "celsius"
        return request.format(c=city), call("get_weather", city=city, unit=unit)
    if kind == 1:
        city = rng.choice(CITIES)
        request = rng.choice(["time in {c}", "what time is it in {c}", "current time in {c}",
                              "clock in {c}"])
        return request.format(c=city), call("get_time", city=city)
    if kind == 2:
        amount = rng.randint(1, 999)
        src, dst = rng.sample(CURRENCIES, 2)
        request = rng.choice(["convert {n} {a} to {b}", "how much is {n} {a} in {b}",
                              "{n} {a} in {b}"])
        return (request.format(n=amount, a=src, b=dst),
                call("convert_currency", amount=amount, **{"from": src, "to": dst}))
    if kind == 3:
        minutes = rng.randint(1, 120)
        request = rng.choice(["set a timer for {n} minutes", "remind me in {n} minutes",
                              "timer for {n} minutes", "start a {n} minute timer"])
        return request.format(n=minutes), call("set_timer", minutes=minutes)
    if kind == 4:
        a, b = rng.randint(1, 999), rng.randint(1, 99)
        op = rng.choice(["+", "-", "*"])
        request = rng.choice(["compute {e}", "calculate {e}", "what is {e}"])
        expression = f"{a} {op} {b}"
        return request.format(e=expression), call("calculator", expression=expression)
    name, text = rng.choice(NAMES), rng.choice(MESSAGES)
    request = rng.choice(["text {n}: {m}", "message {n}: {m}", "tell {n}: {m}"])
    return request.format(n=name, m=text), call("send_message", to=name, text=text)


# What a correct call for each lab tool-call prompt is (the quality set's right calls), to
# report beside validity how often the model also got the arguments right.
LAB_EXPECTED = {prompt: json.dumps(right) for prompt, right in EXPECTED.items()}


def sentence_sample(rng: random.Random) -> str:
    if rng.random() < 0.3:
        country = rng.choice(sorted(COUNTRIES))
        return f"The capital of {country} is {COUNTRIES[country]}."
    det = rng.choice(["The", "A"])
    return f"{det} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.choice(VERBS)} {rng.choice(PLACES)}."


def arithmetic_sample(rng: random.Random) -> str:
    a, b = rng.randint(0, 50), rng.randint(0, 50)
    if rng.random() < 0.6:
        return f"{a} + {b} = {a + b}"
    a, b = max(a, b), min(a, b)
    return f"{a} - {b} = {a - b}"


def make_corpus(n_samples: int, seed: int) -> tuple[list[tuple[str, str]], int]:
    """(prompt, completion) pairs; plain text samples have an empty completion.

    Tool-call prompts that appear in LAB_PROMPTS are dropped so the lab measures
    the model on prompts it never saw. Returns (samples, how many were dropped).
    """
    rng = random.Random(seed)
    held_out = {p[: -len(TOOL_CALL_MARKER)].removeprefix("User: ") for p in TOOL_CALL_PROMPTS}
    samples, dropped = [], 0
    while len(samples) < n_samples:
        r = rng.random()
        if r < 0.70:
            request, completion = tool_call_sample(rng)
            if request in held_out:
                dropped += 1
                continue
            samples.append((f"User: {request}{TOOL_CALL_MARKER}", completion))
        elif r < 0.85:
            samples.append((sentence_sample(rng), ""))
        else:
            samples.append((arithmetic_sample(rng), ""))
    return samples, dropped


# ---------------------------------------------------------------- the tokenizer

def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 style) with <|endoftext|> as EOS, BOS and pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Digits one by one: copying "250" from the prompt into the JSON, or adding
    # two numbers, is then a per-digit job the tiny model can learn.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS,
                                   pad_token=EOS, unk_token=EOS, model_max_length=1024)


def encode_sample(tokenizer, prompt: str, completion: str) -> list[int]:
    """Prompt and completion are encoded separately and joined, so the model sees
    exactly the ids it gets at inference time (a prompt ending in a space stays a
    separate ' ' token instead of merging with the '{' that follows)."""
    ids = tokenizer.encode(prompt, add_special_tokens=False)
    if completion:
        ids += tokenizer.encode(completion, add_special_tokens=False)
    return ids + [tokenizer.eos_token_id]


# ---------------------------------------------------------------- training

def batches(encoded: list[list[int]], batch_size: int, steps: int, pad_id: int, seed: int):
    """Yield `steps` batches (input_ids, labels), each (B, T_max); padding is labelled -100.

    A "sortish" order: shuffle, sort each window of 64 batches by length, cut it
    into batches, shuffle those. Rows in a batch have similar lengths, so little
    compute goes to padding, and every epoch still sees the whole corpus.
    """
    g = torch.Generator().manual_seed(seed)
    window = 64 * batch_size
    step = 0
    while True:
        order = torch.randperm(len(encoded), generator=g).tolist()
        chunks = []
        for start in range(0, len(order) - window + 1, window):
            part = sorted(order[start:start + window], key=lambda i: len(encoded[i]))
            chunks += [part[k:k + batch_size] for k in range(0, window, batch_size)]
        for c in torch.randperm(len(chunks), generator=g).tolist():
            rows = [encoded[i] for i in chunks[c]]
            t_max = max(len(r) for r in rows)
            input_ids = torch.full((batch_size, t_max), pad_id, dtype=torch.long)   # (B, T)
            labels = torch.full((batch_size, t_max), -100, dtype=torch.long)        # (B, T)
            for b, r in enumerate(rows):
                input_ids[b, : len(r)] = torch.tensor(r)
                labels[b, : len(r)] = torch.tensor(r)   # the EOS is learned, the pad after it is not
            yield input_ids, labels
            step += 1
            if step == steps:
                return


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def measure(model, tokenizer) -> list[dict]:
    from course.tiny_model import completion_is_valid_json, greedy_completion

    rows = []
    for prompt in LAB_PROMPTS:
        text, ended = greedy_completion(model, tokenizer, prompt, max_new_tokens=64)
        rows.append({"prompt": prompt, "completion": text, "eos": ended,
                     "tool_call": prompt in TOOL_CALL_PROMPTS,
                     "valid_json": completion_is_valid_json(text, ended),
                     "exact": bool(ended) and text == LAB_EXPECTED.get(prompt)})
    return rows


def write_model_card(out_dir: Path, info: dict, rows: list[dict]) -> None:
    tool_rows = [r for r in rows if r["tool_call"]]
    n_ok = sum(r["valid_json"] for r in tool_rows)
    n_exact = sum(r["exact"] for r in tool_rows)
    lines = [
        "# tiny-model: the course's shipped GPT-2",
        "",
        "A 4-layer GPT-2 (`transformers.GPT2LMHeadModel`) small enough to train on a laptop CPU, used",
        "by every lab to show generation token by token. Trained by `datasets/tiny_model_train.py`",
        "(`make model`) on a synthetic corpus; it knows nothing else.",
        "",
        "| | |",
        "| --- | --- |",
        f"| parameters | {info['n_params']:,} |",
        f"| layers / heads / width | {info['n_layer']} / {info['n_head']} / {info['n_embd']} |",
        f"| context (n_positions) | {info['n_positions']} |",
        f"| vocabulary | {info['vocab_size']} byte-level BPE tokens, `<|endoftext|>` = id {info['eos_id']} (EOS, BOS and pad) |",
        f"| corpus | {info['n_samples']:,} samples: 70% JSON tool calls, 15% sentences, 15% sums |",
        f"| training | {info['steps']} AdamW steps, batch {info['batch_size']}, peak lr {info['lr']}, seed {SEED} |",
        f"| training time | {info['train_seconds']:.0f} s wall, {info['train_cpu_seconds']:.0f} s CPU, torch.set_num_threads({info['threads']}) (whole script {info['total_seconds']:.0f} s wall) |",
        f"| final training loss | {info['final_loss']:.3f} |",
        "",
        "## JSON validity (measured by the training script)",
        "",
        f"**{n_ok}/{len(tool_rows)} = {n_ok / len(tool_rows):.0%}** of the greedy completions of the",
        "tool-call prompts in `course.tiny_model.LAB_PROMPTS` parse as a JSON object and end with EOS",
        "(max_new_tokens=64). These prompts were removed from the training corpus.",
        f"{n_exact}/{len(tool_rows)} are also exactly the right call (tool and every argument copied",
        "correctly); validity is what the labs rely on, the arguments are often wrong in a tiny model.",
        f"`tests/test_tiny_model.py` checks the rate stays at least {JSON_RATE_KEY} minus a small margin.",
        "",
        "| prompt | greedy completion | EOS | valid JSON | exact call |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        prompt = r["prompt"].replace("\n", "\\n").replace("|", "\\|")
        text = r["completion"].replace("\n", "\\n").replace("|", "\\|")
        valid = ("yes" if r["valid_json"] else "**no**") if r["tool_call"] else "-"
        exact = ("yes" if r["exact"] else "no") if r["tool_call"] else "-"
        lines.append(f"| `{prompt}` | `{text}` | {'yes' if r['eos'] else 'no'} | {valid} | {exact} |")
    lines += [
        "",
        "Cut a tool call at a small `max_new_tokens` (say 8) and you get half a JSON object: the",
        "case Lab 03's finish reasons are about.",
        "",
        "## Loading (offline)",
        "",
        "```python",
        "from course.tiny_model import load_tiny_model",
        "model, tokenizer = load_tiny_model()   # from_pretrained(TINY_MODEL_DIR, local_files_only=True)",
        "```",
        "",
        "Files: `config.json`, `generation_config.json`, `model.safetensors` (fp32), `tokenizer.json`,",
        "`tokenizer_config.json`, `special_tokens_map.json`, `validity.json` (the table above as data).",
        "",
    ]
    text = "\n".join(lines).replace(JSON_RATE_KEY, f"{n_ok / len(tool_rows):.2f}")
    (out_dir / "README.md").write_text(text)


JSON_RATE_KEY = "@@RATE@@"


def main() -> None:
    assert set(LAB_EXPECTED) == set(TOOL_CALL_PROMPTS), "LAB_EXPECTED must cover the lab tool-call prompts"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--samples", type=int, default=60_000)
    parser.add_argument("--vocab-size", type=int, default=1024)
    # One thread: a 1M-parameter model gains little from two, and two threads slow
    # to a crawl when another process wants the second core.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    for name in ("steps", "batch_size", "samples", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"`--{name.replace('_', '-')}` must be an integer >= 1, got {getattr(args, name)}.")

    from transformers import GPT2Config, GPT2LMHeadModel

    t_start = time.perf_counter()
    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    samples, dropped = make_corpus(args.samples, SEED)
    print(f"corpus: {len(samples):,} samples ({dropped} held-out lab prompts dropped)")
    tokenizer = train_tokenizer([p + c for p, c in samples], args.vocab_size)
    print(f"tokenizer: {len(tokenizer)} tokens, eos id {tokenizer.eos_token_id}")
    encoded = [encode_sample(tokenizer, p, c) for p, c in samples]
    print(f"tokens per sample: mean {sum(map(len, encoded)) / len(encoded):.1f}, max {max(map(len, encoded))}")

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=128, n_layer=4, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
    model.train()
    t_train, cpu_train = time.perf_counter(), time.process_time()
    bar = tqdm(batches(encoded, args.batch_size, args.steps, tokenizer.pad_token_id, SEED),
               total=args.steps, desc="training", unit="step")
    loss_ema = None
    for step, (input_ids, labels) in enumerate(bar):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, warmup=100)
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        bar.set_postfix(loss=f"{loss_ema:.3f}")
    train_seconds = time.perf_counter() - t_train
    train_cpu_seconds = time.process_time() - cpu_train   # what the loop got of the CPU, load or not
    model.eval()

    rows = measure(model, tokenizer)
    tool_rows = [r for r in rows if r["tool_call"]]
    rate = sum(r["valid_json"] for r in tool_rows) / len(tool_rows)
    for r in rows:
        print(f"{r['prompt']!r:60} -> {r['completion']!r}{'' if r['eos'] else ' (no EOS)'}")
    print(f"JSON validity on {len(tool_rows)} lab tool-call prompts: {rate:.0%}; "
          f"exact calls: {sum(r['exact'] for r in tool_rows)}/{len(tool_rows)}")

    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    special = {"bos_token": EOS, "eos_token": EOS, "pad_token": EOS, "unk_token": EOS}
    if not (out / "special_tokens_map.json").exists():
        (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    total_seconds = time.perf_counter() - t_start
    (out / "validity.json").write_text(json.dumps(
        {"json_validity_rate": rate, "max_new_tokens": 64, "n_prompts": len(tool_rows),
         "rows": rows}, indent=2) + "\n")
    write_model_card(out, {"n_params": n_params, "n_layer": config.n_layer, "n_head": config.n_head,
                           "n_embd": config.n_embd, "n_positions": config.n_positions,
                           "vocab_size": len(tokenizer), "eos_id": tokenizer.eos_token_id,
                           "n_samples": len(samples), "steps": args.steps, "batch_size": args.batch_size,
                           "lr": args.lr, "threads": args.threads, "train_seconds": train_seconds,
                           "train_cpu_seconds": train_cpu_seconds,
                           "total_seconds": total_seconds, "final_loss": loss_ema}, rows)
    print(f"training {train_seconds:.0f} s wall ({train_cpu_seconds:.0f} s CPU), "
          f"whole script {total_seconds:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
