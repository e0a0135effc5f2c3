"""Reference for lab04 (prefill and decode): the judges' expected values.

Two ways to generate greedily from a decoder-only model, a causality probe, the
two request-latency numbers servers report (TTFT and TPOT), and the scoring of a
fixed quality set with the decision whether a candidate regressed against a baseline.

Model call shapes used here:
    model(input_ids)            (B, T) long -> logits (B, T, V)
    decoder.prefill(input_ids)  (B, T) long -> (logits (B, T, V), kv)
    decoder.decode(token_ids, kv)  (B, k) long, the k NEW tokens -> (logits (B, k, V), kv)
"""
from __future__ import annotations

import json
import math

import jsonschema
import torch


# ---------------------------------------------------------------- validation

def check_prompt(input_ids, name: str = "input_ids") -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"`{name}` must be a 2-D tensor of shape (1, T), got {got}.")  # pragma: no mutate
    if input_ids.shape[0] != 1 or input_ids.shape[1] < 1:
        raise ValueError(f"`{name}` must have shape (1, T) with T >= 1, got {tuple(input_ids.shape)}.")  # pragma: no mutate
    if input_ids.dtype != torch.long:
        raise ValueError(f"`{name}` must hold token ids as torch.long, got {input_ids.dtype}.")  # pragma: no mutate


def check_generation(input_ids, max_new_tokens, eos_token_id) -> None:
    check_prompt(input_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}.")  # pragma: no mutate
    if eos_token_id is not None and (isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int)
                                     or eos_token_id < 0):
        raise ValueError(f"`eos_token_id` must be None or an integer >= 0, got {eos_token_id!r}.")  # pragma: no mutate


# ---------------------------------------------------------------- generation

def next_token(logits: torch.Tensor) -> int:
    """Greedy choice from the LAST position of (1, T, V) logits; ties -> lowest id."""
    return int(torch.argmax(logits[0, -1]))


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None) -> list[int]:
    check_generation(input_ids, max_new_tokens, eos_token_id)
    ids = input_ids.clone()                                  # (1, T0)
    out: list[int] = []
    while len(out) < max_new_tokens:
        token = next_token(model(ids))                       # one full forward over every token so far
        out.append(token)
        if token == eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[token]], dtype=torch.long)], dim=1)
    return out


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None) -> list[int]:
    check_generation(input_ids, max_new_tokens, eos_token_id)
    if on_token is not None and not callable(on_token):
        raise ValueError(f"`on_token` must be None or a callable, got {type(on_token).__name__}.")  # pragma: no mutate
    logits, kv = decoder.prefill(input_ids.clone())          # (1, T0, V): the prompt, once
    out: list[int] = []
    while True:
        token = next_token(logits)
        out.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_token_id or len(out) == max_new_tokens:
            return out
        logits, kv = decoder.decode(torch.tensor([[token]], dtype=torch.long), kv)  # (1, 1, V)


def changed_positions(model, input_ids, other_ids, atol=1e-5) -> list[int]:
    check_prompt(input_ids, "input_ids")
    check_prompt(other_ids, "other_ids")
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have the shape of `input_ids` {tuple(input_ids.shape)}, "  # pragma: no mutate
                         f"got {tuple(other_ids.shape)}.")  # pragma: no mutate
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"`atol` must be a finite number >= 0, got {atol!r}.")  # pragma: no mutate
    a = model(input_ids.clone())[0].double()                 # (T, V)
    b = model(other_ids.clone())[0].double()                 # (T, V)
    diff = (a - b).abs().amax(dim=-1)                         # (T,)
    return [t for t in range(diff.numel()) if float(diff[t]) > atol]


# ---------------------------------------------------------------- latency

def _number(name, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"`{name}` must be a finite number, got {x!r}.")  # pragma: no mutate
    return float(x)


def latency_metrics(arrival_time, token_times) -> dict:
    arrival = _number("arrival_time", arrival_time)
    if arrival < 0:
        raise ValueError(f"`arrival_time` must be >= 0, got {arrival_time!r}.")  # pragma: no mutate
    if not isinstance(token_times, (list, tuple)):
        raise ValueError(f"`token_times` must be a list of timestamps, got {type(token_times).__name__}.")  # pragma: no mutate
    if len(token_times) == 0:
        raise ValueError("`token_times` must hold at least one timestamp, got [].")  # pragma: no mutate
    times = [_number(f"token_times[{i}]", t) for i, t in enumerate(token_times)]
    if times[0] < arrival:
        raise ValueError(f"`token_times[0]` must be >= `arrival_time` ({arrival_time!r}), got {token_times[0]!r}.")  # pragma: no mutate
    for i in range(1, len(times)):
        if times[i] < times[i - 1]:
            raise ValueError(f"`token_times` must be non-decreasing, got {token_times[i]!r} after "  # pragma: no mutate
                             f"{token_times[i - 1]!r} at index {i}.")  # pragma: no mutate
    n = len(times)
    return {
        "ttft": times[0] - arrival,                                   # includes time spent queued
        "tpot": None if n == 1 else (times[-1] - times[0]) / (n - 1),  # n - 1 gaps between n tokens
        "e2e": times[-1] - arrival,
    }


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None) -> dict:
    if not callable(clock):
        raise ValueError(f"`clock` must be a callable returning the time, got {type(clock).__name__}.")  # pragma: no mutate
    now = clock()
    arrival = _number("arrival_time", arrival_time)
    if arrival > now:
        raise ValueError(f"`arrival_time` must not be later than the clock's current time {now!r}, "  # pragma: no mutate
                         f"got {arrival_time!r}.")  # pragma: no mutate
    times: list[float] = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id,
                             on_token=lambda _token: times.append(clock()))
    return {"tokens": tokens, "token_times": times, **latency_metrics(arrival_time, times)}


# ---------------------------------------------------------------- one change at a time: a quality set

SCORE_KEYS = ("n", "exact", "schema_pass", "exact_prompts")
METRICS = ("exact", "schema_pass")


def quality_score(completions, quality_set) -> dict:
    if not isinstance(quality_set, dict) or not isinstance(quality_set.get("items"), list) \
            or not quality_set["items"]:
        raise ValueError(f"`quality_set` must be {{'schema': ..., 'items': [at least one item]}}, "  # pragma: no mutate
                         f"got {quality_set!r}.")  # pragma: no mutate
    if not isinstance(completions, dict):
        raise ValueError(f"`completions` must be a dict {{prompt: text}}, got {type(completions).__name__}.")  # pragma: no mutate
    items = quality_set["items"]
    wanted = [item["prompt"] for item in items]
    missing = [p for p in wanted if p not in completions]
    if missing:
        raise ValueError(f"`completions` must hold every prompt of the quality set, got none for {missing[0]!r}.")  # pragma: no mutate
    unknown = [p for p in completions if p not in wanted]
    if unknown:
        raise ValueError(f"`completions` must hold only the quality set's prompts, got {unknown[0]!r}.")  # pragma: no mutate
    for p in wanted:
        if not isinstance(completions[p], str):
            raise ValueError(f"`completions` must map each prompt to a str, got {completions[p]!r} for {p!r}.")  # pragma: no mutate
    validator = jsonschema.Draft202012Validator(quality_set["schema"])
    exact_prompts, passing = [], 0
    for item in items:
        try:
            call = json.loads(completions[item["prompt"]])
        except ValueError:                       # not JSON: neither exact nor valid
            continue
        passing += validator.is_valid(call)
        if call == item["expected"]:
            exact_prompts.append(item["prompt"])
    n = len(items)
    return {"n": n, "exact": len(exact_prompts) / n, "schema_pass": passing / n, "exact_prompts": exact_prompts}


def regressed(baseline, candidate, *, tolerance) -> tuple[bool, str]:
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) \
            or not 0 <= tolerance <= 1:
        raise ValueError(f"`tolerance` must be a number in [0, 1], got {tolerance!r}.")  # pragma: no mutate
    for name, score in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(score, dict) or any(k not in score for k in SCORE_KEYS):
            raise ValueError(f"`{name}` must be a score from quality_score with keys {SCORE_KEYS}, got {score!r}.")  # pragma: no mutate
    if candidate["n"] != baseline["n"]:
        raise ValueError(f"`candidate` must be scored on the baseline's quality set (n={baseline['n']}), "  # pragma: no mutate
                         f"got n={candidate['n']!r}.")  # pragma: no mutate
    dropped = [m for m in METRICS if baseline[m] - candidate[m] > tolerance]   # a drop of exactly tolerance is allowed
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    parts = [f"{m} fell from {baseline[m]:.4f} to {candidate[m]:.4f}, more than the tolerance {tolerance:g}"
             for m in dropped] or [f"every rate within {tolerance:g} of the baseline"]
    if lost:
        parts.append("no longer exact: " + ", ".join(repr(p) for p in lost))
    return bool(dropped), "; ".join(parts)
