"""Scaffolding of a generation run that every lab may use: the result type, samplers, the course's tools, failure injection.

    result = GenerationResult(tokens=[5, 0], text=" cat", finish_reason=FinishReason.STOP)
    GenerationResult.from_dict(result.to_dict()) == result     # a result survives JSON
    greedy_sampler(logits)                  # argmax, lowest id on ties
    sample = seeded_sampler(3)              # the same seed gives the same tokens
    TOOL_SCHEMAS, ALLOWED_TOOLS             # the course's tools and its allow-list
    executor = RecordingExecutor()          # a tool "runs" by being recorded in executor.calls
    model = InjectedModel(ScriptedModel("eos_at_step_3"), prompt_len=1, cancel=ev, cancel_at=2)

None of this is a lab's answer, so no lab hides it. The answers built on it live in
`course.generation` (the loop: model -> logits -> sampler -> append -> stop check) and
`course.acceptance` (the acceptance stages, run specs, failure log and replay), both
Lab 03's; they import these names from here and re-export them, so later labs may keep
writing `from course.generation import GenerationResult`. Lab 03 itself, graded while those
two modules are out of reach, imports from here. This module imports no answer module.

A run spec (the input half of a failure sample, Lab 03) is plain data:

    {"fixture": name, "prompt_ids": [...] or absent, "params": {...generate's keywords},
     "seed": None or an int, "inject": {key: value for the keys of INJECT_DEFAULTS}}
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import torch

from ._checks import check_int, check_type, is_int
from .finish import FinishReason

MAX_STOP_STRINGS = 16   # a generation accepts at most this many stop strings

RESULT_FIELDS = ("tokens", "text", "finish_reason", "stop_reason", "usage", "raw_output", "error")


@dataclass
class GenerationResult:
    tokens: list[int]                      # every generated id, including the one that ended the run
    text: str                              # what the user may see (course.generation's docstring)
    finish_reason: FinishReason
    stop_reason: str | int | None = None   # the stop string or stop token id that fired; None for EOS
    usage: dict = field(default_factory=dict)  # {"input_tokens": T0, "output_tokens": len(tokens)}
    raw_output: str = ""                   # text of every generated token, untrimmed
    error: str | None = None               # the exception, when finish_reason is error

    def to_dict(self) -> dict:
        d = asdict(self)
        d["finish_reason"] = str(self.finish_reason)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "GenerationResult":
        """The result a `to_dict()` (or a JSON line of it) describes; unknown keys are ignored."""
        check_type("data", data, dict, "a dict made by GenerationResult.to_dict()")
        missing = [k for k in ("tokens", "text", "finish_reason") if k not in data]
        if missing:
            raise ValueError(f"`data` must hold tokens, text and finish_reason, got keys {sorted(data)}.")
        kept = {k: copy.deepcopy(data[k]) for k in RESULT_FIELDS if k in data}
        kept["finish_reason"] = FinishReason.parse(kept["finish_reason"])
        kept["tokens"] = list(kept["tokens"])
        if "usage" in kept:
            kept["usage"] = dict(kept["usage"] or {})
        return cls(**kept)


# ---------------------------------------------------------------- samplers

def greedy_sampler(logits: torch.Tensor) -> int:
    """argmax of a (V,) logit vector; the lowest id wins a tie."""
    return int(torch.argmax(logits))


def seeded_sampler(seed: int):
    """Sample from softmax(logits) with a torch.Generator seeded once with `seed`:
    the same seed gives the same tokens, so a sampled run can be replayed."""
    check_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)

    def sample(logits: torch.Tensor) -> int:
        probs = torch.softmax(logits.float(), dim=-1)  # (V,)
        return int(torch.multinomial(probs, 1, generator=gen))
    return sample


# ---------------------------------------------------------------- the course's tools

TOOL_SCHEMAS = {
    "get_weather": {
        "type": "object", "required": ["city"], "additionalProperties": False,
        "properties": {"city": {"enum": ["Paris", "London", "Tokyo"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    },
    "get_time": {
        "type": "object", "required": ["city"], "additionalProperties": False,
        "properties": {"city": {"type": "string", "minLength": 1}},
    },
    "transfer": {
        "type": "object", "required": ["to", "amount"], "additionalProperties": False,
        "properties": {"to": {"type": "string", "minLength": 1},
                       "amount": {"type": "integer", "minimum": 1, "maximum": 10000}},
    },
    "delete_file": {
        "type": "object", "required": ["path"], "additionalProperties": False,
        "properties": {"path": {"type": "string", "minLength": 1}},
    },
}
ALLOWED_TOOLS = ["get_weather", "get_time", "transfer"]  # delete_file is known, not allowed


class RecordingExecutor:
    """Runs a tool call by recording it. `calls` lists every (tool, args) it was given,
    so a test can assert that no side effect ran. fail_with: an exception to raise."""

    def __init__(self, fail_with: Exception | None = None):
        if fail_with is not None and not isinstance(fail_with, BaseException):
            raise ValueError(f"`fail_with` must be None or an exception, got {fail_with!r}.")
        self.calls: list[tuple[str, dict]] = []
        self.fail_with = fail_with

    def __call__(self, tool: str, args: dict) -> dict:
        self.calls.append((tool, copy.deepcopy(args)))
        if self.fail_with is not None:
            raise self.fail_with
        return {"tool": tool, "status": "done"}

    def __repr__(self) -> str:
        return f"RecordingExecutor(calls={len(self.calls)})"


# ---------------------------------------------------------------- failure injection

SPEC_KEYS = ("fixture", "prompt_ids", "params", "seed", "inject")
INJECT_DEFAULTS = {"raise_at": None, "nan_at": None, "cancel_at": None, "seconds_per_call": 0.0,
                   "banned_words": [], "banned_token_ids": []}


class InjectedModel:
    """Wrap a model to inject a run's failures: each call advances `clock` by
    `seconds_per_call` (time passes while the model works), and `cancel` is set once
    `cancel_at` tokens exist (cancel_at=0: before the first call)."""

    def __init__(self, model, *, prompt_len: int, cancel=None, cancel_at=None, clock=None,
                 seconds_per_call: float = 0.0):
        if cancel_at is not None and not (is_int(cancel_at) and cancel_at >= 0):
            raise ValueError(f"`cancel_at` must be None or an integer >= 0, got {cancel_at!r}.")
        if cancel_at is not None and cancel is None:
            raise ValueError("`cancel` must be given when `cancel_at` is set, got None.")
        self.model, self.prompt_len = model, prompt_len
        self.cancel, self.cancel_at = cancel, cancel_at
        self.clock, self.seconds_per_call = clock, seconds_per_call
        self.calls = 0
        if cancel_at == 0:
            cancel.set()

    vocab = property(lambda self: self.model.vocab)
    vocab_size = property(lambda self: self.model.vocab_size)
    eos_token_id = property(lambda self: self.model.eos_token_id)

    def decode(self, token_ids) -> str:
        return self.model.decode(token_ids)

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_len
        self.calls += 1
        if self.clock is not None and self.seconds_per_call:
            self.clock.advance(self.seconds_per_call)
        out = self.model(input_ids)  # (1, V)
        if self.cancel_at is not None and step + 1 == self.cancel_at:
            self.cancel.set()
        return out
