"""The shipped tiny model: where it lives, how to load it, and the lab prompts.

    model, tokenizer = load_tiny_model()            # GPT2LMHeadModel, eval mode
    ids = tokenizer(LAB_PROMPTS[0], return_tensors="pt").input_ids   # (1, T)

The checkpoint in datasets/tiny-model is a 4-layer GPT-2 (about 1M parameters)
trained in a few CPU minutes by datasets/tiny_model_train.py on a synthetic
corpus: JSON tool calls, short sentences and small sums. It loads from the local
folder only; nothing is downloaded.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ._checks import check_int

# datasets/ is data, not a package, so the path is computed from this file.
TINY_MODEL_DIR: str = str(Path(__file__).resolve().parent.parent / "datasets" / "tiny-model")

TOOL_CALL_MARKER = "\nCall: "   # a tool-call prompt ends with this; the JSON follows

# The prompts every lab demonstrates on. The tool-call ones are held out of the
# training corpus (the training script removes them), so the JSON-validity rate
# on them, stated in datasets/tiny-model/README.md, is measured on unseen prompts.
LAB_PROMPTS: tuple[str, ...] = (
    "User: weather in Paris\nCall: ",
    "User: what's the weather in Tokyo in fahrenheit\nCall: ",
    "User: how warm is it in Lisbon\nCall: ",
    "User: forecast for Nairobi\nCall: ",
    "User: time in London\nCall: ",
    "User: what time is it in Seoul\nCall: ",
    "User: convert 250 USD to EUR\nCall: ",
    "User: how much is 40 GBP in JPY\nCall: ",
    "User: set a timer for 15 minutes\nCall: ",
    "User: remind me in 45 minutes\nCall: ",
    "User: compute 12 * 7\nCall: ",
    "User: calculate 300 - 45\nCall: ",
    "User: text Alice: running late\nCall: ",
    "User: message Bob: see you at noon\nCall: ",
    "User: weather in Oslo in fahrenheit\nCall: ",
    "User: current time in Toronto\nCall: ",
    "The capital of France is",
    "The small cat",
    "A tired dog",
    "12 + 7 =",
    "30 + 45 =",
    "9 - 4 =",
)


def is_tool_call_prompt(prompt: str) -> bool:
    """True for the prompts whose completion should be a JSON tool call."""
    if not isinstance(prompt, str):
        raise ValueError(f"`prompt` must be a str, got {type(prompt).__name__}.")
    return prompt.endswith(TOOL_CALL_MARKER)


TOOL_CALL_PROMPTS: tuple[str, ...] = tuple(p for p in LAB_PROMPTS if is_tool_call_prompt(p))


def default_device() -> str:
    """"cuda" when a GPU is visible to torch, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_tiny_model(device: str | torch.device | None = None):
    """Load the shipped checkpoint from TINY_MODEL_DIR (local files only).

    Returns (model, tokenizer): a transformers GPT2LMHeadModel in eval mode on
    `device` (default: default_device()), and its PreTrainedTokenizerFast whose
    eos_token, bos_token and pad_token are all "<|endoftext|>".
    """
    from transformers import AutoTokenizer, GPT2LMHeadModel

    if device is None:
        device = default_device()
    if not isinstance(device, (str, torch.device)):
        raise ValueError(f"`device` must be None, a str or a torch.device, got {type(device).__name__}.")
    if not (Path(TINY_MODEL_DIR) / "config.json").is_file():
        raise FileNotFoundError(f"no tiny model at {TINY_MODEL_DIR}; run `make model` to train it.")
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL_DIR, local_files_only=True)
    model = GPT2LMHeadModel.from_pretrained(TINY_MODEL_DIR, local_files_only=True)
    return model.to(device).eval(), tokenizer


def completion_is_valid_json(text: str, ended_with_eos: bool) -> bool:
    """The tool-call check: the completion parses as one JSON object and the model
    stopped by itself (EOS), not because max_new_tokens cut it."""
    if not isinstance(text, str):
        raise ValueError(f"`text` must be a str, got {type(text).__name__}.")
    if not ended_with_eos:
        return False
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


@torch.no_grad()
def greedy_completion(model, tokenizer, prompt: str, max_new_tokens: int = 64) -> tuple[str, bool]:
    """Greedy-decode `prompt` with a transformers model; return (text of the new
    tokens without EOS, whether generation ended on EOS)."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"`prompt` must be a non-empty str, got {prompt!r}.")
    check_int("max_new_tokens", max_new_tokens, 1)
    device = next(model.parameters()).device
    ids = tokenizer(prompt, return_tensors="pt").input_ids.to(device)  # (1, T)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.eos_token_id)
    new = out[0, ids.shape[1]:].tolist()
    ended = tokenizer.eos_token_id in new
    if ended:
        new = new[: new.index(tokenizer.eos_token_id)]
    return tokenizer.decode(new), ended


def json_validity_rate(model, tokenizer, prompts=TOOL_CALL_PROMPTS, max_new_tokens: int = 64) -> float:
    """Fraction of `prompts` whose greedy completion is valid JSON ending in EOS."""
    prompts = tuple(prompts)
    if not prompts:
        raise ValueError("`prompts` must hold at least one prompt, got 0.")
    ok = sum(completion_is_valid_json(*greedy_completion(model, tokenizer, p, max_new_tokens))
             for p in prompts)
    return ok / len(prompts)
