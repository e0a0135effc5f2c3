"""kv_bytes_per_token and kv_bytes_for_config: the hidden cases of the cell kv_bytes_per_token_counts_kv_heads."""
from __future__ import annotations

import pytest

from autograder.reference import lab05 as ref

from .judging import calls_of, case, int_result, judge_config_calls, judge_rejects, records

pytestmark = pytest.mark.cell("kv_bytes_per_token_counts_kv_heads",
                              description="bytes per token from the K/V heads, for MHA, GQA and MQA, and from "
                                          "config.json files")

_KV_HINT = ("Count the KEY/VALUE heads: num_key_value_heads when the config has it (GQA/MQA), else the "
            "number of attention heads (MHA). Query heads do not take cache memory.")


@pytest.mark.parametrize("args, hint", [
    case("tiny_model_mha", [4, 4, 32, 4], "2 (key and value) * n_layer * n_kv_heads * head_dim * bytes.",
         probe=("calls", "kv_bytes_per_token", [[[4, 4, 32, 4], {}]]), visible=True),
    case("gqa_llama_3_8b_bf16", [32, 8, 128, 2], "Llama-3-8B keeps 8 K/V heads: 128 KiB per token.",
         probe=("calls", "kv_bytes_per_token", [[[32, 8, 128, 2], {}]])),
    case("mqa_one_kv_head", [2, 1, 64, 2], "MQA: one K/V head for all query heads.",
         probe=("calls", "kv_bytes_per_token", [[[2, 1, 64, 2], {}]])),
])
def test_bytes_per_token(observation, args, hint):
    """2 * n_layer * n_kv_heads * head_dim * dtype_bytes, an int."""
    int_result(records(observation, 1)[0], f"kv_bytes_per_token{tuple(args)}", ref.kv_bytes_per_token(*args), hint)


GQA = ["llama-3-8b", "mistral-7b", "qwen2.5-7b"]
DTYPE = ["llama-3-8b with `dtype`", "datasets/tiny-model"]


@pytest.mark.parametrize("names, dtype_bytes, hint", [
    case("gpt2_config_mha", ["gpt2"], None, "GPT-2 names its sizes n_layer, n_head, n_embd; head_dim = "
         "n_embd // n_head; torch_dtype float32 is 4 bytes.", probe=("config_calls", ["gpt2"]), visible=True),
    case("gqa_configs_count_kv_heads", GQA, None,
         _KV_HINT + " Without head_dim, head_dim = hidden_size // num_attention_heads.",
         probe=("config_calls", GQA), points=2),
    case("dtype_bytes_overrides_torch_dtype", ["llama-3-8b", "gpt2"], 1,
         "When dtype_bytes is given (e.g. 1 for an fp8 cache), use it instead of torch_dtype.",
         probe=("config_calls", ["llama-3-8b", "gpt2"], 1)),
    case("reads_dtype_of_current_transformers", DTYPE, None,
         "Current transformers saves the number type as `dtype` (older versions: `torch_dtype`); "
         "read `dtype` first and fall back to `torch_dtype`.", probe=("config_calls", DTYPE)),
    case("explicit_head_dim_wins", ["explicit head_dim"], None,
         "This config has 2 layers, 2 K/V heads, hidden_size 64, 4 attention heads and head_dim 32 (not "
         "64 // 4 = 16): when the config has `head_dim`, use it; hidden_size // num_attention_heads is only the "
         "fallback. Expected 2 * 2 * 2 * 32 * 2 (float16) = 512 bytes.",
         probe=("config_calls", ["explicit head_dim"])),
    case("llama_names_without_kv_heads_are_mha", ["llama names, MHA"], None,
         "This config uses the Llama names but has no num_key_value_heads: it is MHA, so every one of its 4 "
         "attention heads has its own K/V head. Expected 2 * 3 * 4 * 16 * 2 (bfloat16) = 768 bytes.",
         probe=("config_calls", ["llama names, MHA"])),
    case("no_number_type_means_float32", ["no number type"], None,
         "This config has neither `dtype` nor `torch_dtype`: count float32, 4 bytes. Expected "
         "2 * 2 * 1 * 8 * 4 = 128 bytes.", probe=("config_calls", ["no number type"])),
    case("every_listed_number_type", ["float64", "float8_e4m3fn"], None,
         "Look the number type up in DTYPE_BYTES: float64 is 8 bytes (1 layer, 1 K/V head of 8 / 2 = 4: "
         "2 * 1 * 1 * 4 * 8 = 64 bytes) and float8_e4m3fn 1 byte (3 layers, 2 K/V heads of 32 / 4 = 8: "
         "2 * 3 * 2 * 8 * 1 = 96 bytes); not every type other than float32 is 2 bytes wide.",
         probe=("config_calls", ["float64", "float8_e4m3fn"])),
])
def test_bytes_for_config(observation, names, dtype_bytes, hint):
    """The sizes of a config.json, in either naming scheme; K/V heads; dtype, then torch_dtype."""
    judge_config_calls(observation, names, dtype_bytes, hint)


BAD_SIZES = [   # (param, label, args, kwargs)
    ("n_layer", "n_layer=0", [], {"n_layer": 0, "n_kv_heads": 8, "head_dim": 128, "dtype_bytes": 2}),
    ("n_kv_heads", "n_kv_heads=True", [], {"n_layer": 32, "n_kv_heads": True, "head_dim": 128, "dtype_bytes": 2}),
    ("head_dim", "head_dim=0", [], {"n_layer": 32, "n_kv_heads": 8, "head_dim": 0, "dtype_bytes": 2}),
    ("dtype_bytes", "dtype_bytes=2.0", [], {"n_layer": 32, "n_kv_heads": 8, "head_dim": 128, "dtype_bytes": 2.0}),
]


@pytest.mark.probe("calls", "kv_bytes_per_token", calls_of(BAD_SIZES))
def test_rejects_bad_sizes(observation):
    """ValueError naming the parameter and showing its value."""
    judge_rejects(observation, "kv_bytes_per_token", BAD_SIZES)
