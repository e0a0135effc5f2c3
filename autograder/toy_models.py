"""Deterministic toy models for the lab04 graders and tests (prefill vs decode).

ToyCausalLM: the logits at position t depend only on tokens 0..t, through a
running integer hash. Each row is a permutation of 0..12, so the argmax is
unique and the runner-up is a full 1.0 behind: no ties, no float noise.
ToyBidirectionalLM is NOT causal. Recorder wraps either one, logs each call as
[kind, tokens fed] and, given a course.FakeClock, charges simulated time per call.

These are inputs, not answers: the graders build them in the student's process.
"""
from __future__ import annotations

import torch

__all__ = ["TOY_VOCAB", "TOY_EOS", "TOY_PROMPT", "TOY_EOS_PROMPT", "ToyCache", "ToyCausalLM",
           "ToyBidirectionalLM", "Recorder", "ids"]

TOY_VOCAB = 13
TOY_EOS = 0
_H0 = 12345
_MOD = 2_147_483_647


def _toy_step(h: int, token: int) -> int:
    return (h * 1_000_003 + token * 7919 + 17) % _MOD


def _toy_row(h: int) -> list[float]:
    a, b = 1 + h % (TOY_VOCAB - 1), (h // (TOY_VOCAB - 1)) % TOY_VOCAB
    return [float((a * v + b) % TOY_VOCAB) for v in range(TOY_VOCAB)]


def _check_ids(ids, what):
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        got = (tuple(ids.shape), ids.dtype) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"`{what}` must be a 2-D torch.long tensor (batch, tokens), got {got}.")
    if ids.shape[1] < 1:
        raise ValueError(f"`{what}` must hold at least one token, got shape {tuple(ids.shape)}.")
    if int(ids.min()) < 0 or int(ids.max()) >= TOY_VOCAB:
        raise ValueError(f"`{what}` must hold ids in [0, {TOY_VOCAB - 1}], got {ids.tolist()}.")


class ToyCache:
    """What a toy decoder remembers about the tokens it has seen: one hash per row."""

    def __init__(self, hashes, length):
        self.hashes = tuple(hashes)
        self.length = length

    def __repr__(self):
        return f"ToyCache(length={self.length})"


class ToyCausalLM:
    """A deterministic causal LM with both call shapes of the course decoder.

        model(input_ids)               (B, T) -> logits (B, T, V)
        model.prefill(input_ids)       (B, T) -> (logits (B, T, V), cache)
        model.decode(token_ids, cache) (B, k) -> (logits (B, k, V), a NEW cache)

    decode never changes the cache it is given, so a loop that keeps using the
    prefill cache instead of the returned one goes wrong.
    """

    vocab_size = TOY_VOCAB
    eos_token_id = TOY_EOS

    def _run(self, ids, hashes):
        rows, out_h = [], []
        for b in range(ids.shape[0]):
            h, row = hashes[b], []
            for token in ids[b].tolist():
                h = _toy_step(h, token)
                row.append(_toy_row(h))
            rows.append(row)
            out_h.append(h)
        return torch.tensor(rows, dtype=torch.float32), out_h  # (B, T, V)

    def __call__(self, input_ids):
        _check_ids(input_ids, "input_ids")
        return self._run(input_ids, [_H0] * input_ids.shape[0])[0]

    def prefill(self, input_ids):
        _check_ids(input_ids, "input_ids")
        logits, hashes = self._run(input_ids, [_H0] * input_ids.shape[0])
        return logits, ToyCache(hashes, input_ids.shape[1])

    def decode(self, token_ids, cache):
        _check_ids(token_ids, "token_ids")
        if not isinstance(cache, ToyCache) or len(cache.hashes) != token_ids.shape[0]:
            raise ValueError(f"`kv` must be the cache returned by prefill/decode for this batch, got {cache!r}.")
        logits, hashes = self._run(token_ids, list(cache.hashes))
        return logits, ToyCache(hashes, cache.length + token_ids.shape[1])


class ToyBidirectionalLM(ToyCausalLM):
    """NOT causal: every position also sees a summary of the whole sequence.

    The extra term is below 0.4 while rows differ by 1.0, so the argmax at an
    early position never changes, but its logits do (like an encoder's).
    """

    def __call__(self, input_ids):
        logits = super().__call__(input_ids)                 # (B, T, V)
        total = input_ids.sum(dim=1) % 37                    # (B,)
        ramp = torch.arange(1, TOY_VOCAB + 1, dtype=torch.float32) / TOY_VOCAB   # (V,)
        return logits + 0.01 * total.float()[:, None, None] * ramp[None, None, :]


class Recorder:
    """Wrap a model or decoder; log each call as [kind, tokens fed] and, given a
    FakeClock, charge simulated time for it:

        forward / prefill of T tokens   PREFILL_FIXED + PREFILL_PER_TOKEN * T seconds
        decode of k tokens              DECODE_PER_TOKEN * k seconds
    """

    PREFILL_FIXED = 0.25
    PREFILL_PER_TOKEN = 0.0625
    DECODE_PER_TOKEN = 0.03125

    def __init__(self, inner, clock=None):
        self.inner = inner
        self.clock = clock
        self.events: list[list] = []

    def _charge(self, seconds):
        if self.clock is not None:
            self.clock.advance(seconds)

    def __call__(self, input_ids):
        out = self.inner(input_ids)
        self.events.append(["forward", int(input_ids.shape[1])])
        self._charge(self.PREFILL_FIXED + self.PREFILL_PER_TOKEN * input_ids.shape[1])
        return out

    def prefill(self, input_ids):
        out = self.inner.prefill(input_ids)
        self.events.append(["prefill", int(input_ids.shape[1])])
        self._charge(self.PREFILL_FIXED + self.PREFILL_PER_TOKEN * input_ids.shape[1])
        return out

    def decode(self, token_ids, kv):
        out = self.inner.decode(token_ids, kv)
        self.events.append(["decode", int(token_ids.shape[1])])
        self._charge(self.DECODE_PER_TOKEN * token_ids.shape[1])
        return out


# Prompts for the toys (found once by search; the judges recompute everything).
TOY_PROMPT = [3, 7, 1, 12, 5, 9]          # greedy path: 9 tokens before the first EOS (id 0)
TOY_EOS_PROMPT = [2, 10, 11, 4]           # greedy path reaches EOS as its 7th token


def ids(tokens):
    return torch.tensor([list(tokens)], dtype=torch.long)  # (1, T)
