"""ExperimentRecord: what one generation run used and produced.

Every lab that samples writes one of these, so a run can be compared with
another and replayed: the sampling parameters, the seed, the tokens, the text
and the finish reason.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .finish import FinishReason


@dataclass
class ExperimentRecord:
    fixture: str                       # fixture or prompt name the run used
    params: dict                       # e.g. {"temperature": 0.7, "top_p": 0.9, "max_tokens": 8}
    seed: int | None                   # None for greedy runs, which need no seed
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None   # which stop string / token fired, if any

    def __post_init__(self) -> None:
        if not isinstance(self.fixture, str) or not self.fixture:
            raise ValueError(f"`fixture` must be a non-empty string, got {self.fixture!r}.")
        if not isinstance(self.params, dict):
            raise ValueError(f"`params` must be a dict, got {type(self.params).__name__}.")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"`seed` must be an integer or None, got {self.seed!r}.")
        if self.finish_reason is not None:
            self.finish_reason = FinishReason.parse(self.finish_reason)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["finish_reason"] = None if self.finish_reason is None else str(self.finish_reason)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentRecord":
        return cls(**d)

    @classmethod
    def from_json(cls, s: str) -> "ExperimentRecord":
        return cls.from_dict(json.loads(s))
