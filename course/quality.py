"""A fixed quality set for the tiny model's tool-call task, and the runs that feed it. Used in lab04.

One change at a time (a KV cache, batching, a lower-precision cache, quantized weights), each
regressed against the same quality set: the 16 tool-call prompts of
course.tiny_model.LAB_PROMPTS, each with the exactly-right call written by hand from the
request (not from the model), and a JSON schema of a well-formed call to one of the model's
six tools.

    qs = quality_set()                                  # {"schema": ..., "items": [{"prompt", "expected"}]}
    texts = complete(decoder, tokenizer, prompts(qs))   # {prompt: completion text}: cached greedy, fp32
    texts = complete(decoder, tokenizer, prompts(qs), batched=True)        # one left-padded batch
    texts = complete(bf16_kv_cache(decoder), tokenizer, prompts(qs))       # keys/values kept in bfloat16
    texts = complete(int8_dynamic(decoder), tokenizer, prompts(qs))        # int8 linear layers (CPU)

Scoring the completions and deciding whether a candidate regressed are lab04's exercises
(`quality_score`, `regressed`); nothing here computes either. Every run is greedy on the
CPU, so the completions, and the figures computed from them, are the same on every run.
"""
from __future__ import annotations

import copy
import warnings

import torch

from .acceptance import call_schema
from .decoder import CourseDecoder
from .kv_cache import KVCache
from .tiny_model import TOOL_CALL_PROMPTS

MAX_NEW_TOKENS = 64   # the longest right call of the set is well under this many tokens

# The arguments each of the tiny model's tools takes (what its training corpus writes).
TOOL_ARGS = {
    "get_weather": {"type": "object", "required": ["city", "unit"], "additionalProperties": False,
                    "properties": {"city": {"type": "string", "minLength": 1},
                                   "unit": {"enum": ["celsius", "fahrenheit"]}}},
    "get_time": {"type": "object", "required": ["city"], "additionalProperties": False,
                 "properties": {"city": {"type": "string", "minLength": 1}}},
    "convert_currency": {"type": "object", "required": ["amount", "from", "to"], "additionalProperties": False,
                         "properties": {"amount": {"type": "integer", "minimum": 1},
                                        "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                        "to": {"type": "string", "pattern": "^[A-Z]{3}$"}}},
    "set_timer": {"type": "object", "required": ["minutes"], "additionalProperties": False,
                  "properties": {"minutes": {"type": "integer", "minimum": 1}}},
    "calculator": {"type": "object", "required": ["expression"], "additionalProperties": False,
                   "properties": {"expression": {"type": "string", "minLength": 1}}},
    "send_message": {"type": "object", "required": ["to", "text"], "additionalProperties": False,
                     "properties": {"to": {"type": "string", "minLength": 1},
                                    "text": {"type": "string", "minLength": 1}}},
}


def tool_call_schema(tool_args: dict = TOOL_ARGS) -> dict:
    """The JSON schema of one call {"tool": name, "args": {...}}: the course's call envelope
    (course.acceptance.call_schema) plus, for each tool, the schema its arguments must meet."""
    schema = call_schema(tool_args)
    schema["allOf"] = [{"if": {"properties": {"tool": {"const": name}}},
                        "then": {"properties": {"args": args}}} for name, args in sorted(tool_args.items())]
    return schema


def _call(tool: str, **args) -> dict:
    return {"tool": tool, "args": args}


# The right call for each tool-call prompt, read off the request by hand.
EXPECTED = {
    "User: weather in Paris\nCall: ": _call("get_weather", city="Paris", unit="celsius"),
    "User: what's the weather in Tokyo in fahrenheit\nCall: ": _call("get_weather", city="Tokyo", unit="fahrenheit"),
    "User: how warm is it in Lisbon\nCall: ": _call("get_weather", city="Lisbon", unit="celsius"),
    "User: forecast for Nairobi\nCall: ": _call("get_weather", city="Nairobi", unit="celsius"),
    "User: time in London\nCall: ": _call("get_time", city="London"),
    "User: what time is it in Seoul\nCall: ": _call("get_time", city="Seoul"),
    "User: convert 250 USD to EUR\nCall: ": _call("convert_currency", amount=250, **{"from": "USD", "to": "EUR"}),
    "User: how much is 40 GBP in JPY\nCall: ": _call("convert_currency", amount=40, **{"from": "GBP", "to": "JPY"}),
    "User: set a timer for 15 minutes\nCall: ": _call("set_timer", minutes=15),
    "User: remind me in 45 minutes\nCall: ": _call("set_timer", minutes=45),
    "User: compute 12 * 7\nCall: ": _call("calculator", expression="12 * 7"),
    "User: calculate 300 - 45\nCall: ": _call("calculator", expression="300 - 45"),
    "User: text Alice: running late\nCall: ": _call("send_message", to="Alice", text="running late"),
    "User: message Bob: see you at noon\nCall: ": _call("send_message", to="Bob", text="see you at noon"),
    "User: weather in Oslo in fahrenheit\nCall: ": _call("get_weather", city="Oslo", unit="fahrenheit"),
    "User: current time in Toronto\nCall: ": _call("get_time", city="Toronto"),
}
assert tuple(EXPECTED) == TOOL_CALL_PROMPTS, "the quality set follows course.tiny_model.LAB_PROMPTS"


def quality_set() -> dict:
    """The fixed quality set, a fresh copy: {"schema": the tool-call schema, "items":
    [{"prompt": str, "expected": the right call}, ...]} in the order of LAB_PROMPTS."""
    return {"schema": tool_call_schema(),
            "items": [{"prompt": p, "expected": copy.deepcopy(call)} for p, call in EXPECTED.items()]}


def prompts(qs: dict) -> list[str]:
    """The prompts of a quality set, in its order."""
    if not isinstance(qs, dict) or not isinstance(qs.get("items"), list):
        raise ValueError(f"`qs` must be a quality set {{'schema': ..., 'items': [...]}}, got {type(qs).__name__}.")
    return [item["prompt"] for item in qs["items"]]


# ---------------------------------------------------------------- the runs (baseline and candidates)

@torch.no_grad()
def complete(decoder, tokenizer, prompt_list, *, batched: bool = False,
             max_new_tokens: int = MAX_NEW_TOKENS) -> dict[str, str]:
    """Greedy completions of `prompt_list` with the KV cache: {prompt: text of the new tokens,
    EOS left out}. One request at a time, or with batched=True all of them in one left-padded
    batch (padding masked out of attention). A completion that never reaches EOS keeps what
    was generated (usually half a JSON object)."""
    if not isinstance(decoder, CourseDecoder):
        raise ValueError(f"`decoder` must be a CourseDecoder, got {type(decoder).__name__}.")
    prompt_list = list(prompt_list)
    if not prompt_list or not all(isinstance(p, str) and p for p in prompt_list):
        raise ValueError(f"`prompt_list` must hold at least one non-empty str, got {prompt_list!r}.")
    if not isinstance(batched, bool):
        raise ValueError(f"`batched` must be a bool, got {batched!r}.")
    eos = tokenizer.eos_token_id
    encoded = [tokenizer.encode(p) for p in prompt_list]
    if batched:
        width = max(len(e) for e in encoded)
        ids = torch.tensor([[eos] * (width - len(e)) + e for e in encoded], dtype=torch.long)      # (B, T)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], dtype=torch.long)
        rows = decoder.generate_greedy(ids.to(decoder.device), max_new_tokens, eos,
                                       attention_mask=mask.to(decoder.device))[:, width:].tolist()
    else:
        rows = [decoder.generate_greedy(torch.tensor([e], dtype=torch.long, device=decoder.device),
                                        max_new_tokens, eos)[0, len(e):].tolist() for e in encoded]
    texts = {}
    for prompt, new in zip(prompt_list, rows):
        if eos in new:
            new = new[:new.index(eos)]
        texts[prompt] = tokenizer.decode(new)
    return texts


class BF16KVCache(KVCache):
    """A growing cache that stores keys and values in bfloat16 (half the bytes of float32)
    and hands them back in the compute dtype: the rounding is the only change."""

    def append(self, layer, k, v):
        dtype = k.dtype
        k_all, v_all = super().append(layer, k.to(torch.bfloat16), v.to(torch.bfloat16))   # (B, H, T, D)
        return k_all.to(dtype), v_all.to(dtype)


def _copy_of(decoder: CourseDecoder) -> CourseDecoder:
    if not isinstance(decoder, CourseDecoder):
        raise ValueError(f"`decoder` must be a CourseDecoder, got {type(decoder).__name__}.")
    return copy.deepcopy(decoder)


def bf16_kv_cache(decoder: CourseDecoder) -> CourseDecoder:
    """A copy of `decoder` whose KV cache keeps keys and values in bfloat16; weights unchanged."""
    other = _copy_of(decoder)
    other.cache_factory = BF16KVCache.from_spec
    return other


def int8_dynamic(decoder: CourseDecoder) -> CourseDecoder:
    """A CPU copy of `decoder` whose linear layers (the tied output layer too) run in int8:
    dynamic quantization, the weights quantized once, each activation when it is computed."""
    other = _copy_of(decoder).to("cpu")
    with warnings.catch_warnings():           # torch.ao.quantization announces its move to torchao
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic
        return quantize_dynamic(other, {torch.nn.Linear}, dtype=torch.qint8)
