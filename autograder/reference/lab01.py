"""Reference for lab01: softmax, temperature, entropy, one seeded run.

Written for the judges; the notebook's solution is written differently and both
must agree. Shapes: logits (..., V) -> probabilities (..., V); entropy (...,).
"""
from __future__ import annotations

import math
import numbers

import torch

import course


def check_logits(logits, name="logits"):
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() == 0:
        got = f"shape {tuple(logits.shape)}, dtype {logits.dtype}" if isinstance(logits, torch.Tensor) \
            else type(logits).__name__
        raise ValueError(f"`{name}` must be a floating-point tensor of shape (..., V), got {got}.")  # pragma: no mutate
    if logits.shape[-1] == 0:
        raise ValueError(f"`{name}` must have at least one token in its last dimension, got shape "  # pragma: no mutate
                         f"{tuple(logits.shape)}.")  # pragma: no mutate
    if torch.isnan(logits).any():
        raise ValueError(f"`{name}` must not contain NaN, got {int(torch.isnan(logits).sum())} NaN entries.")  # pragma: no mutate
    if (logits == -math.inf).all(dim=-1).any():
        raise ValueError(f"`{name}` has a row that is entirely -inf: no token is left to choose.")  # pragma: no mutate


def _shifted(logits):
    """x - max(x) per row, with the +inf rule: in a row holding +inf, the +inf entries
    become 0 and everything else -inf (so the +inf tokens share the mass evenly)."""
    pos_inf = logits == math.inf                                  # (..., V)
    row_has_inf = pos_inf.any(dim=-1, keepdim=True)               # (..., 1)
    top = logits.amax(dim=-1, keepdim=True)                       # (..., 1)
    safe_top = torch.where(row_has_inf, torch.zeros_like(top), top)
    shifted = logits - safe_top                                   # <= 0 in finite rows
    inf_rule = torch.where(pos_inf, torch.zeros_like(logits), torch.full_like(logits, -math.inf))
    return torch.where(row_has_inf, inf_rule, shifted)


def softmax(logits):
    check_logits(logits)
    e = torch.exp(_shifted(logits))                # in [0, 1], the max entry is exactly 1
    return e / e.sum(dim=-1, keepdim=True)


def log_softmax(logits):
    check_logits(logits)
    s = _shifted(logits)
    return s - torch.log(torch.exp(s).sum(dim=-1, keepdim=True))


def greedy_token_ids(logits):
    check_logits(logits)
    return torch.argmax(logits, dim=-1)            # first maximum = lowest id on ties


def check_temperature(temperature):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"`temperature` must be a finite number >= 0, got {temperature!r}.")  # pragma: no mutate


def apply_temperature(logits, temperature):
    check_temperature(temperature)
    check_logits(logits)
    if temperature == 0:
        keep = torch.nn.functional.one_hot(greedy_token_ids(logits), logits.shape[-1]).bool()
        return torch.where(keep, logits, torch.full_like(logits, -math.inf))
    return logits / float(temperature)


def entropy(probs):
    if not isinstance(probs, torch.Tensor) or not probs.is_floating_point() or probs.dim() == 0:
        raise ValueError("`probs` must be a floating-point tensor of shape (..., V).")  # pragma: no mutate
    if torch.isnan(probs).any() or (probs < 0).any():
        raise ValueError("`probs` must hold probabilities >= 0 (no NaN).")  # pragma: no mutate
    if ((probs.sum(dim=-1) - 1).abs() > 1e-4).any():
        raise ValueError("`probs` rows must sum to 1 within 1e-4.")  # pragma: no mutate
    plogp = torch.where(probs > 0, probs * torch.log(torch.where(probs > 0, probs, 1.0)), 0.0)
    return -plogp.sum(dim=-1)


def run_experiment(model, *, temperature, seed, max_tokens):
    check_temperature(temperature)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an integer >= 1, got {max_tokens!r}.")  # pragma: no mutate
    greedy = temperature == 0
    if not greedy and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer when temperature > 0, got {seed!r}.")  # pragma: no mutate
    gen = None if greedy else torch.Generator().manual_seed(seed)
    ids = model.prompt()                                          # (1, T0)
    tokens, finish = [], course.FinishReason.LENGTH
    while len(tokens) < max_tokens:
        logits = model(ids)[0]                                    # (V,)
        if greedy:
            token = int(greedy_token_ids(logits))
        else:
            probs = softmax(apply_temperature(logits, temperature))
            token = int(torch.multinomial(probs, 1, generator=gen))
        tokens.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)     # (1, T + 1)
        if token == model.eos_token_id:
            finish = course.FinishReason.STOP
            break
    shown = tokens[:-1] if finish is course.FinishReason.STOP else tokens
    return course.ExperimentRecord(
        fixture=model.fixture.name, params={"temperature": float(temperature), "max_tokens": max_tokens},
        seed=None if greedy else seed, tokens=tokens, text=model.decode(shown), finish_reason=finish)


def best_temperature_for_token(logits, token_id, temperatures):
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        raise ValueError("`logits` must be a 1-D tensor.")  # pragma: no mutate
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < logits.shape[0]:
        raise ValueError(f"`token_id` must be an integer in [0, {logits.shape[0] - 1}], got {token_id!r}.")  # pragma: no mutate
    if not isinstance(temperatures, (list, tuple)) or len(temperatures) == 0:
        raise ValueError(f"`temperatures` must be a non-empty list, got {temperatures!r}.")  # pragma: no mutate
    best_t, best_p = None, -1.0
    for t in temperatures:
        p = float(softmax(apply_temperature(logits, t))[token_id])
        if p > best_p:
            best_t, best_p = float(t), p
    return {"temperature": best_t, "probability": best_p}
