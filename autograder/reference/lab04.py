"""Reference for lab04 (prefill and decode): the judges' expected values.

Two ways to generate greedily from a decoder-only model, a causality probe, and
the two request-latency numbers servers report (TTFT and TPOT).

Model call shapes used here:
    model(input_ids)            (B, T) long -> logits (B, T, V)
    decoder.prefill(input_ids)  (B, T) long -> (logits (B, T, V), kv)
    decoder.decode(token_ids, kv)  (B, k) long, the k NEW tokens -> (logits (B, k, V), kv)
"""
from __future__ import annotations

import math

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
