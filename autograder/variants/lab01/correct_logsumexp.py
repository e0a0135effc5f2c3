"""A correct solution written differently from the reference: softmax as
exp(s - logsumexp(s)) on the shifted logits s = x - max (torch.logsumexp), the +inf
rule through a mask count,
greedy via scatter, entropy via torch.special.entr, the sampler on a (1, V) batch."""
import math

import torch

import course

EXPECT_FAIL = {}


def check_logits(logits):
    if type(logits) is not torch.Tensor or logits.dtype not in (torch.float16, torch.bfloat16,
                                                                 torch.float32, torch.float64):
        raise ValueError(f"`logits` must be a float tensor, got {type(logits).__name__}.")
    if logits.ndim < 1 or logits.size(-1) < 1:
        raise ValueError(f"`logits` must have shape (..., V) with V >= 1, got {tuple(logits.shape)}.")
    if logits.isnan().any():
        raise ValueError("`logits` contains NaN.")
    if (~(logits > -math.inf)).all(-1).any():
        raise ValueError("`logits` has a row where every entry is -inf.")


def _inf_rule(logits):
    """(rows with +inf, probabilities 1/k on their +inf entries)"""
    is_inf = torch.isposinf(logits)
    k = is_inf.sum(-1, keepdim=True)
    return k > 0, is_inf.to(logits.dtype) / k.clamp(min=1).to(logits.dtype)


def _shift(logits):
    """x - max(x) per row (0 in rows holding +inf, which the +inf rule answers instead).
    Shift first: in float32, x - logsumexp(x) at |x| ~ 1e4 keeps only ~3 decimals."""
    has_inf, inf_probs = _inf_rule(logits)
    finite = torch.where(has_inf, torch.zeros_like(logits), logits)
    return has_inf, inf_probs, finite - finite.max(dim=-1, keepdim=True).values


def softmax(logits):
    check_logits(logits)
    has_inf, inf_probs, s = _shift(logits)
    return torch.where(has_inf, inf_probs, torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)))


def log_softmax(logits):
    check_logits(logits)
    has_inf, inf_probs, s = _shift(logits)
    return torch.where(has_inf, torch.log(inf_probs), s - torch.logsumexp(s, dim=-1, keepdim=True))


def greedy_token_ids(logits):
    check_logits(logits)
    is_max = logits == logits.max(dim=-1, keepdim=True).values
    ids = torch.arange(logits.size(-1)).expand_as(logits)
    big = torch.full_like(ids, logits.size(-1))
    return torch.where(is_max, ids, big).min(dim=-1).values


def apply_temperature(logits, temperature):
    ok = type(temperature) in (int, float) and temperature == temperature and abs(temperature) != math.inf \
        and temperature >= 0
    if not ok:
        raise ValueError(f"`temperature` must be a finite number >= 0, got {temperature!r}.")
    check_logits(logits)
    if temperature > 0:
        return torch.div(logits, temperature)
    idx = greedy_token_ids(logits).unsqueeze(-1)
    return torch.full_like(logits, -math.inf).scatter(-1, idx, torch.gather(logits, -1, idx))


def entropy(probs):
    if type(probs) is not torch.Tensor or not probs.is_floating_point() or probs.ndim < 1:
        raise ValueError(f"`probs` must be a float tensor (..., V), got {type(probs).__name__}.")
    if not bool((probs >= 0).all()):  # also False for NaN
        raise ValueError("`probs` must hold probabilities >= 0 and no NaN.")
    if not bool(torch.isclose(probs.sum(-1), torch.ones(()), rtol=0, atol=1e-4).all()):
        raise ValueError("`probs` rows must sum to 1 within 1e-4.")
    return torch.special.entr(probs).sum(-1)


def run_experiment(model, *, temperature, seed, max_tokens):
    apply_temperature(torch.zeros(1), temperature)
    if type(max_tokens) is not int or max_tokens <= 0:
        raise ValueError(f"`max_tokens` must be a positive integer, got {max_tokens!r}.")
    sampled = temperature > 0
    if sampled and type(seed) is not int:
        raise ValueError(f"`seed` must be an int for temperature > 0, got {seed!r}.")
    gen = torch.Generator()
    if sampled:
        gen.manual_seed(seed)
    ids = model.prompt()
    out = []
    reason = "length"
    for _step in range(max_tokens):
        row = model(ids)                                 # (1, V)
        if sampled:
            nxt = torch.multinomial(softmax(apply_temperature(row, temperature)), 1, generator=gen)  # (1, 1)
        else:
            nxt = greedy_token_ids(row).view(1, 1)
        ids = torch.cat((ids, nxt), dim=1)
        out.append(nxt.item())
        if out[-1] == model.eos_token_id:
            reason = "stop"
            break
    text = model.decode(out[:-1] if reason == "stop" else out)
    return course.ExperimentRecord(model.fixture.name, {"temperature": float(temperature), "max_tokens": max_tokens},
                                   seed if sampled else None, out, text, reason)


def best_temperature_for_token(logits, token_id, temperatures):
    if type(logits) is not torch.Tensor or logits.ndim != 1:
        raise ValueError("`logits` must be one vector (V,).")
    if type(token_id) is not int or token_id < 0 or token_id >= len(logits):
        raise ValueError(f"`token_id` out of range: {token_id!r}.")
    if type(temperatures) not in (list, tuple) or len(temperatures) == 0:
        raise ValueError(f"`temperatures` must be a non-empty list, got {temperatures!r}.")
    probs = torch.stack([softmax(apply_temperature(logits, t))[token_id] for t in temperatures])
    i = int(torch.argmax(probs))   # the first maximum
    return {"temperature": float(temperatures[i]), "probability": float(probs[i])}
