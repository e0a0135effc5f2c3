"""ScriptedModel: replays a fixture with the call shape of a real model.

    logits = model(input_ids)      # input_ids (B, T) long -> logits (B, V) float32

The step it replays is the number of tokens generated so far, that is
T - len(prompt). A lab's generation loop cannot tell it from the tiny model
wrapped in the same call shape, so loops are graded on fixed logits and then
demonstrated on a real network.
"""
from __future__ import annotations

import math

import torch

from . import fixtures as _fixtures
from ._checks import is_int


class ScriptedModelError(RuntimeError):
    """Raised on purpose (failure injection) or when the script runs out."""


class ScriptedModel:
    """Replay `fixture` step by step.

    raise_at: step index at which the call raises ScriptedModelError (like a
        model server dying mid-request).
    nan_at: step index at which every logit is NaN (like a numerically broken model).
    """

    def __init__(self, fixture: "_fixtures.Fixture | str", *, raise_at: int | None = None,
                 nan_at: int | None = None) -> None:
        if isinstance(fixture, str):
            fixture = _fixtures.load(fixture)
        if not isinstance(fixture, _fixtures.Fixture):
            raise ValueError(f"`fixture` must be a Fixture or a fixture name, got {type(fixture).__name__}.")
        for name, value in (("raise_at", raise_at), ("nan_at", nan_at)):
            if value is not None and not (is_int(value) and value >= 0):
                raise ValueError(f"`{name}` must be None or an integer >= 0, got {value!r}.")
        self.fixture = fixture
        self.raise_at = raise_at
        self.nan_at = nan_at
        self.calls = 0               # how many times the model was called
        self.steps_seen: list[int] = []  # the step index of each call

    # The tokenizer-like surface the labs use.
    @property
    def vocab(self) -> tuple[str, ...]:
        return self.fixture.vocab

    @property
    def vocab_size(self) -> int:
        return self.fixture.vocab_size

    @property
    def eos_token_id(self) -> int | None:
        return self.fixture.eos_token_id

    def prompt(self, batch_size: int = 1) -> torch.Tensor:
        """The fixture's prompt as input ids, (B, T0)."""
        ids = torch.tensor([self.fixture.prompt_ids], dtype=torch.long)  # (1, T0)
        return ids.expand(batch_size, -1).clone()

    def decode(self, token_ids) -> str:
        return self.fixture.decode(token_ids)

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
            raise ValueError(f"`input_ids` must be a 2-D tensor (batch, tokens), got {got}.")
        step = input_ids.shape[1] - len(self.fixture.prompt_ids)
        self.calls += 1
        self.steps_seen.append(step)
        if step < 0:
            raise ValueError(f"`input_ids` has {input_ids.shape[1]} tokens, fewer than the "
                             f"{len(self.fixture.prompt_ids)}-token prompt of fixture {self.fixture.name!r}.")
        if self.raise_at is not None and step == self.raise_at:
            raise ScriptedModelError(f"injected failure at step {step} (raise_at={self.raise_at}).")
        if step >= self.fixture.n_steps:
            raise ScriptedModelError(f"fixture {self.fixture.name!r} scripts {self.fixture.n_steps} steps; "
                                     f"asked for step {step}. Did the loop miss a stop condition?")
        row = self.fixture.logits(step)  # (V,)
        if self.nan_at is not None and step == self.nan_at:
            row = torch.full_like(row, math.nan)
        return row.unsqueeze(0).expand(input_ids.shape[0], -1).clone()  # (B, V)

    def __repr__(self) -> str:
        return f"ScriptedModel({self.fixture.name!r}, steps={self.fixture.n_steps}, calls={self.calls})"
