"""The lab04 graders' toy models and call recorder behave as the graders assume."""
import torch

from autograder.toy_models import (TOY_EOS, TOY_EOS_PROMPT, TOY_PROMPT, TOY_VOCAB, Recorder, ToyBidirectionalLM,
                                   ToyCausalLM)
from autograder.toy_models import ids as _ids
from autograder.reference import lab04 as ref
from course import FakeClock


def test_toy_rows_are_permutations_so_argmax_is_unique():
    logits = ToyCausalLM()(_ids(TOY_PROMPT))                  # (1, T, V)
    assert logits.shape == (1, len(TOY_PROMPT), TOY_VOCAB)
    for row in logits[0]:
        assert sorted(row.tolist()) == [float(v) for v in range(TOY_VOCAB)]


def test_toy_causal_model_is_causal_and_bidirectional_is_not():
    a = _ids(TOY_PROMPT)
    b = a.clone()
    b[0, 3] = (b[0, 3] + 1) % TOY_VOCAB
    assert ref.changed_positions(ToyCausalLM(), a, b) == [3, 4, 5]
    assert ref.changed_positions(ToyBidirectionalLM(), a, b) == list(range(len(TOY_PROMPT)))
    # the bidirectional model's argmax does not move at early positions: only its logits do
    early = slice(0, 3)
    assert torch.equal(ToyBidirectionalLM()(a)[0, early].argmax(-1), ToyBidirectionalLM()(b)[0, early].argmax(-1))


def test_prefill_then_decode_equals_full_forward():
    toy = ToyCausalLM()
    full = toy(_ids(TOY_PROMPT))                               # (1, 6, V)
    logits, kv = toy.prefill(_ids(TOY_PROMPT[:4]))
    step, kv2 = toy.decode(_ids(TOY_PROMPT[4:]), kv)
    assert torch.equal(torch.cat([logits, step], dim=1), full)
    assert kv.length == 4 and kv2.length == 6                  # decode returned a new cache, the old one is intact


def test_toy_prompts_do_what_the_graders_say():
    toy = ToyCausalLM()
    assert TOY_EOS not in ref.generate_uncached(toy, _ids(TOY_PROMPT), 8)
    path = ref.generate_uncached(toy, _ids(TOY_EOS_PROMPT), 12, TOY_EOS)
    assert path[-1] == TOY_EOS and 3 <= len(path) < 12


def test_recorder_logs_calls_and_charges_the_fake_clock():
    clock = FakeClock(10.0)
    rec = Recorder(ToyCausalLM(), clock)
    tokens = ref.generate_cached(rec, _ids(TOY_PROMPT), 4)
    assert len(tokens) == 4
    assert rec.events == [["prefill", 6], ["decode", 1], ["decode", 1], ["decode", 1]]
    expected = 10.0 + Recorder.PREFILL_FIXED + 6 * Recorder.PREFILL_PER_TOKEN + 3 * Recorder.DECODE_PER_TOKEN
    assert clock() == expected


def test_reference_serve_request_includes_the_queue():
    clock = FakeClock(10.0)
    out = ref.serve_request(Recorder(ToyCausalLM(), clock), _ids(TOY_PROMPT), 3, arrival_time=8.0, clock=clock)
    first = 10.0 + Recorder.PREFILL_FIXED + 6 * Recorder.PREFILL_PER_TOKEN
    assert out["token_times"] == [first, first + Recorder.DECODE_PER_TOKEN, first + 2 * Recorder.DECODE_PER_TOKEN]
    assert out["ttft"] == first - 8.0
    assert out["tpot"] == Recorder.DECODE_PER_TOKEN
