"""Fixed logit fixtures: load them by name from datasets/fixtures/.

A fixture is a JSON file (schema in datasets/fixtures/README.md):

    name, schema_version, description, exercises   what the case is for
    vocab            readable token strings; the token id is the index
    eos_token_id     id of the end-of-sequence token, or null
    prompt_ids       the prompt the steps continue
    steps            per-step next-token logits, each a list of len(vocab) numbers;
                     non-finite entries are the strings "nan", "inf", "-inf"
    params           the sampling / stopping parameters the case is about

Loading never changes a fixture; every tensor handed out is a fresh copy.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from ._checks import check_int, is_int

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "datasets" / "fixtures"
SCHEMA_VERSION = 1
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclass(frozen=True)
class Fixture:
    name: str
    description: str
    exercises: tuple[str, ...]
    vocab: tuple[str, ...]
    eos_token_id: int | None
    prompt_ids: tuple[int, ...]
    steps: tuple[tuple[float, ...], ...]
    params: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def logits(self, step: int | None = None) -> torch.Tensor:
        """Logits as float32: (V,) for one step, or (n_steps, V) when step is None."""
        if step is None:
            return torch.tensor(self.steps, dtype=torch.float32)  # (S, V)
        check_int("step", step, 0, self.n_steps - 1)
        return torch.tensor(self.steps[step], dtype=torch.float32)  # (V,)

    def decode(self, token_ids) -> str:
        """Concatenate the vocab strings of `token_ids` (ints or a 1-D tensor)."""
        if isinstance(token_ids, torch.Tensor):
            token_ids = token_ids.tolist()
        out = []
        for t in token_ids:
            if not is_int(t) or not 0 <= t < self.vocab_size:
                raise ValueError(f"`token_ids` must hold ids in [0, {self.vocab_size - 1}], got {t!r}.")
            out.append(self.vocab[t])
        return "".join(out)

    def token_id(self, text: str) -> int:
        """The id of the vocab entry equal to `text`."""
        try:
            return self.vocab.index(text)
        except ValueError:
            raise ValueError(f"`text` {text!r} is not a token of fixture {self.name!r}.") from None


def available() -> list[str]:
    """Names of every fixture on disk, sorted."""
    return sorted(p.stem for p in FIXTURES_DIR.glob("*.json"))


def load(name: str) -> Fixture:
    """Load the fixture called `name` (file datasets/fixtures/NAME.json)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a fixture name such as 'peaked', got {name!r}.")
    return _load(name)


@lru_cache(maxsize=None)
def _load(name: str) -> Fixture:
    path = FIXTURES_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(available()) or "(none: run `make fixtures`)"
        raise ValueError(f"`name` {name!r} is not a fixture. Known fixtures: {known}.")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return from_dict(raw)


def from_dict(raw: dict) -> Fixture:
    """Build and validate a Fixture from its JSON form."""
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"`schema_version` must be {SCHEMA_VERSION}, got {raw.get('schema_version')!r}.")
    vocab = tuple(raw["vocab"])
    steps = tuple(tuple(_number(x) for x in row) for row in raw["steps"])
    for i, row in enumerate(steps):
        if len(row) != len(vocab):
            raise ValueError(f"fixture {raw['name']!r}: `steps[{i}]` has {len(row)} logits, "
                             f"expected len(vocab) = {len(vocab)}.")
    eos = raw.get("eos_token_id")
    if eos is not None and not 0 <= eos < len(vocab):
        raise ValueError(f"fixture {raw['name']!r}: `eos_token_id` must be in [0, {len(vocab) - 1}], got {eos}.")
    return Fixture(
        name=raw["name"],
        description=raw["description"],
        exercises=tuple(raw.get("exercises", ())),
        vocab=vocab,
        eos_token_id=eos,
        prompt_ids=tuple(raw.get("prompt_ids", ())),
        steps=steps,
        params=dict(raw.get("params", {})),
    )


def _number(x) -> float:
    if isinstance(x, str):
        return _NONFINITE[x]
    return float(x)
