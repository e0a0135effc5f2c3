"""The shipped tiny model: loads offline, has the tokenizer the labs expect, and
still writes valid JSON tool calls at the rate its model card states."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course import tiny_model
from course.decoder import CourseDecoder
from course.tiny_model import LAB_PROMPTS, TINY_MODEL_DIR, TOOL_CALL_PROMPTS, completion_is_valid_json

REPO = Path(__file__).resolve().parent.parent
MARGIN = 0.07   # one prompt in 16 may flip on other hardware or library versions


pytestmark = pytest.mark.usefixtures("one_thread")  # fixture in conftest.py


@pytest.fixture(scope="module")
def shipped():
    model, tok = tiny_model.load_tiny_model("cpu")
    return model, tok, CourseDecoder.from_pretrained(model)


def greedy(decoder, tok, prompt, max_new_tokens):
    ids = tok(prompt, return_tensors="pt").input_ids                # (1, T)
    out = decoder.generate_greedy(ids, max_new_tokens, eos_token_id=tok.eos_token_id)
    new = out[0, ids.shape[1]:].tolist()
    ended = tok.eos_token_id in new
    return tok.decode(new[: new.index(tok.eos_token_id)] if ended else new), ended


def stated_rate():
    card = (Path(TINY_MODEL_DIR) / "README.md").read_text()
    m = re.search(r"\*\*(\d+)/(\d+) = \d+%\*\*", card)
    assert m, "the model card must state the JSON-validity rate as **n/m = x%**"
    return int(m.group(1)) / int(m.group(2)), int(m.group(2))


def test_checkpoint_files_are_shipped_and_small():
    d = Path(TINY_MODEL_DIR)
    assert d.is_absolute() and d == REPO / "datasets" / "tiny-model"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "README.md"):
        assert (d / name).is_file(), name
    assert sum(f.stat().st_size for f in d.iterdir()) < 10 * 2**20
    assert not (REPO / "datasets" / "__init__.py").exists()   # data, not a package


def test_tokenizer_special_tokens_and_sizes(shipped):
    model, tok, _ = shipped
    assert tok.is_fast
    assert tok.eos_token == tok.bos_token == tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id == model.config.eos_token_id == model.generation_config.eos_token_id
    assert len(tok) == model.config.vocab_size and 512 <= len(tok) <= 1024
    assert model.config.n_positions == 1024 and not model.training
    text = 'User: weather in Paris\nCall: {"tool": "get_weather"}'
    assert tok.decode(tok(text).input_ids) == text


def test_loads_offline_with_the_hub_unreachable(tmp_path):
    """A fresh process with every hub fetch made to fail (offline flags, a dead
    endpoint, an empty cache) still loads the model, the tokenizer and the decoder."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9",
               HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(REPO))
    code = (
        "from course.tiny_model import load_tiny_model, TINY_MODEL_DIR\n"
        "from course.decoder import CourseDecoder\n"
        "m, t = load_tiny_model('cpu')\n"
        "d = CourseDecoder.from_pretrained(TINY_MODEL_DIR)\n"
        "ids = t('User: time in Oslo\\nCall: ', return_tensors='pt').input_ids\n"
        "print('OK', m.config.vocab_size, d.generate_greedy(ids, 3).shape[1] - ids.shape[1])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"^OK \d+ 3$", r.stdout, re.M), r.stdout


def test_lab_prompts_have_tool_calls_sentences_and_sums():
    assert len(set(LAB_PROMPTS)) == len(LAB_PROMPTS)
    assert 10 <= len(TOOL_CALL_PROMPTS) <= 20
    rest = [p for p in LAB_PROMPTS if p not in TOOL_CALL_PROMPTS]
    assert any("=" in p for p in rest) and any(p[0].isalpha() for p in rest)


def test_greedy_tool_calls_are_valid_json_at_the_stated_rate(shipped):
    model, tok, decoder = shipped
    rate, n = stated_rate()
    assert n == len(TOOL_CALL_PROMPTS)
    results = [greedy(decoder, tok, p, 64) for p in TOOL_CALL_PROMPTS]
    measured = sum(completion_is_valid_json(text, ended) for text, ended in results) / n
    assert measured >= rate - MARGIN, results
    assert measured >= 0.8 - MARGIN, results


def test_card_helper_with_transformers_generate_agrees_with_the_course_decoder(shipped):
    model, tok, decoder = shipped
    for prompt in TOOL_CALL_PROMPTS[:3]:
        assert tiny_model.greedy_completion(model, tok, prompt, 48) == greedy(decoder, tok, prompt, 48)


def test_a_small_max_new_tokens_cuts_the_json_in_half(shipped):
    _, tok, decoder = shipped
    for prompt in TOOL_CALL_PROMPTS:
        text, ended = greedy(decoder, tok, prompt, 8)
        assert not ended and text.startswith("{")
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)


def test_lab_tool_prompts_were_held_out_of_the_training_corpus():
    spec = importlib.util.spec_from_file_location("tiny_model_train", REPO / "datasets" / "tiny_model_train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    samples, dropped = train.make_corpus(5000, train.SEED)
    prompts = {p for p, _ in samples}
    assert dropped > 0 and not prompts & set(TOOL_CALL_PROMPTS)
    assert set(train.LAB_EXPECTED) == set(TOOL_CALL_PROMPTS)


def test_helpers_validate_their_arguments(shipped, monkeypatch):
    model, tok, _ = shipped
    with pytest.raises(ValueError, match="`max_new_tokens` must be an integer >= 1, got 0."):
        tiny_model.greedy_completion(model, tok, "User: x\nCall: ", 0)
    with pytest.raises(ValueError, match="`prompt` must be a non-empty str, got ''."):
        tiny_model.greedy_completion(model, tok, "", 4)
    with pytest.raises(ValueError, match="`prompts` must hold at least one prompt, got 0."):
        tiny_model.json_validity_rate(model, tok, prompts=[])
    with pytest.raises(ValueError, match="`device` must be None, a str or a torch.device, got int."):
        tiny_model.load_tiny_model(device=0)
    assert not completion_is_valid_json('{"a": 1}', ended_with_eos=False)
    assert completion_is_valid_json('{"a": 1}', ended_with_eos=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tiny_model.default_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert tiny_model.default_device() == "cuda"


@pytest.mark.gpu
def test_tool_calls_on_cuda_match_cpu(shipped):
    model, tok, cpu_decoder = shipped
    gpu_decoder = CourseDecoder.from_pretrained(model, device="cuda")
    for prompt in TOOL_CALL_PROMPTS[:4]:
        ids = tok(prompt, return_tensors="pt").input_ids
        a = cpu_decoder.generate_greedy(ids, 48, eos_token_id=tok.eos_token_id)
        b = gpu_decoder.generate_greedy(ids.to("cuda"), 48, eos_token_id=tok.eos_token_id)
        assert torch.equal(a, b.cpu())
