"""course.quality: the fixed quality set (prompts, hand-written right calls, the call schema) and
the runs lab04 scores (baseline, batched, bf16 KV cache, int8 linear layers). The runs are
tested on a small random decoder, so the file stays fast; lab04's notebook runs them on the
shipped model."""
from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from course import quality
from course.decoder import CourseDecoder, DecoderConfig
from course.tiny_model import TOOL_CALL_PROMPTS

VALIDATOR = jsonschema.Draft202012Validator(quality.tool_call_schema())

# The tiny model's greedy completions as datasets/tiny-model/README.md lists them.
README = {
    "User: convert 250 USD to EUR\nCall: ":
        '{"tool": "convert_currency", "args": {"amount": 133, "from": "GBP", "to": "EUR"}}',
    "User: how much is 40 GBP in JPY\nCall: ":
        '{"tool": "convert_currency", "args": {"amount": 12, "from": "GBP", "to": "GBP"}}',
    "User: set a timer for 15 minutes\nCall: ": '{"tool": "set_timer", "args": {"minutes": 11}}',
    "User: remind me in 45 minutes\nCall: ": '{"tool": "set_timer", "args": {"minutes": 11}}',
    "User: compute 12 * 7\nCall: ": '{"tool": "calculator", "args": {"expression": "111 * 22"}}',
    "User: calculate 300 - 45\nCall: ": '{"tool": "calculator", "args": {"expression": "263 - 47"}}',
}


# ---------------------------------------------------------------- the set

def test_the_set_is_the_sixteen_tool_call_prompts_in_order():
    qs = quality.quality_set()
    assert quality.prompts(qs) == list(TOOL_CALL_PROMPTS) and len(qs["items"]) == 16


def test_every_expected_call_is_well_formed_and_a_few_read_as_written():
    qs = quality.quality_set()
    for item in qs["items"]:
        assert VALIDATOR.is_valid(item["expected"]), item
    by_prompt = {item["prompt"]: item["expected"] for item in qs["items"]}
    assert by_prompt["User: convert 250 USD to EUR\nCall: "] == {
        "tool": "convert_currency", "args": {"amount": 250, "from": "USD", "to": "EUR"}}
    assert by_prompt["User: remind me in 45 minutes\nCall: "] == {"tool": "set_timer", "args": {"minutes": 45}}
    assert by_prompt["User: compute 12 * 7\nCall: "] == {"tool": "calculator", "args": {"expression": "12 * 7"}}


def test_each_call_returns_a_fresh_copy():
    qs = quality.quality_set()
    qs["items"][0]["expected"]["args"]["city"] = "Rome"
    qs["schema"]["properties"]["tool"]["enum"].append("launch")
    again = quality.quality_set()
    assert again["items"][0]["expected"]["args"]["city"] == "Paris"
    assert "launch" not in again["schema"]["properties"]["tool"]["enum"]


def test_the_model_s_wrong_but_well_formed_answers_pass_the_schema_and_do_not_match():
    by_prompt = {item["prompt"]: item["expected"] for item in quality.quality_set()["items"]}
    for prompt, text in README.items():
        call = json.loads(text)
        assert VALIDATOR.is_valid(call), text
        assert call != by_prompt[prompt], text


@pytest.mark.parametrize("call", [
    {"tool": "launch", "args": {}},                                                   # unknown tool
    {"tool": "get_weather", "args": {"city": "Paris"}},                               # a required argument missing
    {"tool": "get_time", "args": {"city": "Paris", "unit": "celsius"}},               # an argument it does not take
    {"tool": "set_timer", "args": {"minutes": "15"}},                                 # wrong type
    {"tool": "convert_currency", "args": {"amount": 5, "from": "usd", "to": "EUR"}},  # not a currency code
    {"tool": "calculator", "args": {"expression": "1 + 1"}, "note": "extra"},         # extra top-level key
    ["get_time", {"city": "Oslo"}],
    "get_time",
    None,
])
def test_the_schema_refuses_what_is_not_one_well_formed_call(call):
    assert not VALIDATOR.is_valid(call)


def test_prompts_rejects_what_is_not_a_quality_set():
    with pytest.raises(ValueError, match="`qs`"):
        quality.prompts([{"prompt": "x"}])


# ---------------------------------------------------------------- the runs, on a small random decoder

class _Chars:
    """A tokenizer over the characters "ab{}" with EOS = 0: enough for `complete`."""
    eos_token_id = 0
    alphabet = "\0ab{}:"

    def encode(self, text):
        return [self.alphabet.index(c) for c in text]

    def decode(self, ids):
        return "".join(self.alphabet[i] for i in ids)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return CourseDecoder(DecoderConfig(vocab_size=len(_Chars.alphabet), n_positions=64, n_embd=16, n_layer=2, n_head=2))


PROMPTS = ["ab{", "b", "{a:b}ab", "aab"]


def test_complete_returns_one_text_per_prompt_without_eos(small):
    texts = quality.complete(small, _Chars(), PROMPTS, max_new_tokens=6)
    assert list(texts) == PROMPTS
    assert all(isinstance(t, str) and "\0" not in t and len(t) <= 6 for t in texts.values())


def test_a_batch_gives_the_texts_of_one_request_at_a_time(small):
    one_by_one = quality.complete(small, _Chars(), PROMPTS, max_new_tokens=8)
    assert quality.complete(small, _Chars(), PROMPTS, batched=True, max_new_tokens=8) == one_by_one


def test_the_bf16_cache_stores_bfloat16_and_leaves_the_original_alone(small):
    other = quality.bf16_kv_cache(small)
    assert other is not small and small.cache_factory is not other.cache_factory
    _, kv = other.prefill(torch.tensor([[1, 2, 3]]))
    assert isinstance(kv, quality.BF16KVCache) and kv.k[0].dtype == torch.bfloat16 and kv.length == 3
    logits, _ = other.decode(torch.tensor([[4]]), kv)
    assert logits.dtype == torch.float32 and kv.length == 4
    assert type(small.prefill(torch.tensor([[1, 2, 3]]))[1]) is not quality.BF16KVCache


def test_int8_quantizes_every_linear_layer_of_a_copy(small):
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    other = quality.int8_dynamic(small)
    n_linear = sum(type(m) is torch.nn.Linear for m in small.modules())        # the original keeps float weights
    assert n_linear == 2 * 4 + 1                                               # 4 per block, and the output layer
    assert sum(type(m) is torch.nn.Linear for m in other.modules()) == 0
    assert sum(isinstance(m, DynamicLinear) for m in other.modules()) == n_linear
    texts = quality.complete(other, _Chars(), PROMPTS, max_new_tokens=4)
    assert list(texts) == PROMPTS


def test_complete_validates_its_arguments(small):
    with pytest.raises(ValueError, match="`decoder`"):
        quality.complete(object(), _Chars(), PROMPTS)
    with pytest.raises(ValueError, match="`prompt_list`"):
        quality.complete(small, _Chars(), [])
    with pytest.raises(ValueError, match="`batched`"):
        quality.complete(small, _Chars(), PROMPTS, batched=1)
    with pytest.raises(ValueError, match="`decoder`"):
        quality.bf16_kv_cache("decoder")
