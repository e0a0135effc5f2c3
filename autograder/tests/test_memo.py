"""The expected values kept with the graders (autograder/memo.py) are the ones the graders
would compute, and a change to what they are computed from makes the file stale."""
import copy

import pytest
import torch

from autograder import memo, rounding


def test_the_labs_that_keep_values():
    assert memo.labs() == ["lab04", "lab05"]


def _fresh_within_budget(lab, stored, fresh):
    """Every kept value equals a fresh computation: token ids, sizes and positions exactly, logits
    within LOGIT_ATOL (the tolerance the graders judge them with: another CPU's kernels move them by
    a few ulps, autograder/graders/README.md)."""
    assert stored.keys() == fresh.keys(), f"{lab}: the kept keys are not the ones the memo computes"
    for key in fresh:
        d = rounding.difference(stored[key], fresh[key])
        assert d <= rounding.LOGIT_ATOL, (f"{lab} {key}: the kept value differs from a fresh one by {d:.3g} "
                                          f"(tolerance {rounding.LOGIT_ATOL}): run `python -m autograder.memo {lab}`")


@pytest.mark.parametrize("lab", memo.labs())
def test_the_kept_values_are_current_and_equal_a_fresh_computation(lab):
    assert memo.is_current(lab), (f"autograder/graders/{lab}/_expected.pt is stale or missing: "
                                  f"run `python -m autograder.memo {lab}`")
    _fresh_within_budget(lab, memo._stored(lab), memo.compute_all(lab))


def test_the_comparison_fails_on_a_perturbed_weight_and_on_another_number_of_steps(monkeypatch):
    """The tolerance is no blanket: the kept lab05 run against one computed with one weight off by
    0.1% (the logits move by far more than LOGIT_ATOL), and against a run one step shorter."""
    from autograder.graders.lab05 import _inputs, expected_memo
    lab = "lab05"
    stored = memo._stored(lab)
    decoder, prompts, eos = _inputs.shipped()
    perturbed = copy.deepcopy(decoder)
    with torch.no_grad():
        next(p for n, p in perturbed.named_parameters() if p.dim() == 2 and "attn" in n).mul_(1.001)
    monkeypatch.setattr(_inputs, "shipped", lambda: (perturbed, prompts, eos))
    fresh = memo.compute_all(lab)
    assert any(rounding.difference(stored[k], fresh[k]) > rounding.LOGIT_ATOL for k in fresh)
    with pytest.raises(AssertionError, match="differs from a fresh one"):
        _fresh_within_budget(lab, stored, fresh)
    monkeypatch.undo()
    p, s = expected_memo.PARITY_RUNS[0]
    shorter = {**stored, f"static_greedy_{p}_{s}": expected_memo.static_greedy(p, s - 1)}
    assert rounding.difference(stored[f"static_greedy_{p}_{s}"], shorter[f"static_greedy_{p}_{s}"]) == float("inf")
    with pytest.raises(AssertionError, match="differs from a fresh one"):
        _fresh_within_budget(lab, stored, shorter)


def test_difference_compares_floats_within_and_the_rest_exactly():
    t = torch.tensor([1.0, 2.0, float("inf"), float("nan")])
    assert rounding.difference(t, t.clone()) == 0.0
    assert rounding.difference(t, t + torch.tensor([0.0, 3e-6, 0.0, 0.0])) == pytest.approx(3e-6, rel=0.1)
    assert rounding.difference(t, t.double()) == float("inf")                       # another dtype
    assert rounding.difference(t, t[:3]) == float("inf")                            # another shape
    assert rounding.difference(torch.tensor([1, 2]), torch.tensor([1, 3])) == float("inf")   # ids exactly
    assert rounding.difference({"tokens": [1, 2]}, {"tokens": [1, 2, 3]}) == float("inf")
    assert rounding.difference({"a": 1}, {"b": 1}) == float("inf")
    assert rounding.difference([1, 2.0], [1, 2.0]) == 0.0 and rounding.difference((1,), [1]) == float("inf")


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
