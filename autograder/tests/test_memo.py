"""The expected values kept with the graders (autograder/memo.py) are the ones the graders
would compute, and a change to what they are computed from makes the file stale."""
import pytest
import torch

from autograder import memo


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype \
            and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_the_labs_that_keep_values():
    assert memo.labs() == ["lab04", "lab05"]


@pytest.mark.parametrize("lab", memo.labs())
def test_the_kept_values_are_current_and_equal_a_fresh_computation(lab):
    assert memo.is_current(lab), (f"autograder/graders/{lab}/_expected.pt is stale or missing: "
                                  f"run `python -m autograder.memo {lab}`")
    stored = memo._stored(lab)
    fresh = memo.compute_all(lab)
    assert stored.keys() == fresh.keys()
    for key in fresh:
        assert _equal(stored[key], fresh[key]), f"{lab} {key}: the kept value differs from a fresh one"


def test_a_changed_source_makes_the_file_stale_and_the_value_is_computed(monkeypatch):
    lab = "lab05"
    key = next(iter(memo.memo_module(lab).MEMO))
    kept = memo.expected(lab, key)
    real = memo.fingerprint
    monkeypatch.setattr(memo, "fingerprint", lambda lab: {**real(lab), "course/decoder.py": "another"})
    memo._stored.cache_clear()
    try:
        assert not memo.is_current(lab)
        calls = []
        monkeypatch.setitem(memo.memo_module(lab).MEMO, key, lambda: calls.append(1) or kept)
        assert memo.expected(lab, key) is kept and calls == [1], "a stale file is not read: the value is computed"
    finally:
        memo._stored.cache_clear()


def test_a_lab_without_a_memo_is_refused_by_name():
    with pytest.raises(ValueError, match="lab01"):
        memo.write("lab01")


def test_the_decoder_read_from_files_is_the_transformers_model_s_weights_and_tokens():
    """checks.shipped_decoder (no transformers import) and CourseDecoder.from_pretrained on
    checks.shipped_model hold the same weights, give the same logits and the same token ids."""
    from autograder.checks import shipped_decoder, shipped_model
    from course.decoder import CourseDecoder
    from course.tiny_model import LAB_PROMPTS, TOOL_CALL_PROMPTS

    light, tokenizer, eos = shipped_decoder()
    hf, hf_tokenizer = shipped_model()
    full = CourseDecoder.from_pretrained(hf)
    a, b = dict(full.named_parameters()), dict(light.named_parameters())
    assert a.keys() == b.keys()
    assert all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
    assert eos == hf_tokenizer.eos_token_id
    for text in [*LAB_PROMPTS, *TOOL_CALL_PROMPTS]:
        assert tokenizer.encode(text).ids == hf_tokenizer.encode(text)
    ids = torch.tensor([hf_tokenizer.encode(LAB_PROMPTS[0])])
    with torch.no_grad():
        assert torch.equal(light(ids), full(ids))
        assert torch.allclose(light(ids), hf(ids).logits, atol=1e-5, rtol=0)


def test_from_safetensors_names_a_folder_without_the_files(tmp_path):
    from course.decoder import CourseDecoder
    with pytest.raises(ValueError, match="`folder`.*" + str(tmp_path.name)):
        CourseDecoder.from_safetensors(tmp_path)
