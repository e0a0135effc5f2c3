"""The course support library: ScriptedModel, FakeClock, FinishReason, ExperimentRecord, plots."""
import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import course  # noqa: E402
from course import ExperimentRecord, FakeClock, FinishReason, ScriptedModel, ScriptedModelError  # noqa: E402
from course.plots import line, prob_bars  # noqa: E402


def greedy_run(model, max_steps=50):
    ids = model.prompt()
    for _ in range(max_steps):
        t = int(model(ids)[0].argmax())
        ids = torch.cat([ids, torch.tensor([[t]])], dim=1)
        if t == model.eos_token_id:
            break
    return ids


def test_scripted_model_replays_by_step_and_has_model_call_shape():
    m = ScriptedModel("eos_at_step_3")
    ids = greedy_run(m)
    assert m.decode(ids[0]) == "<prompt> the cat sat<eos>"
    assert m.calls == 4 and m.steps_seen == [0, 1, 2, 3]


def test_scripted_model_batches_rows():
    m = ScriptedModel("peaked")
    out = m(m.prompt(batch_size=3))
    assert out.shape == (3, m.vocab_size) and out.dtype == torch.float32
    assert torch.equal(out[0], out[2])


def test_scripted_model_output_is_a_copy():
    m = ScriptedModel("peaked")
    out = m(m.prompt())
    out += 1
    assert not torch.equal(out, m(m.prompt()))


def test_failure_injection_raise_at():
    m = ScriptedModel("eos_at_step_3", raise_at=2)
    ids = m.prompt()
    for _ in range(2):
        ids = torch.cat([ids, m(ids).argmax(-1, keepdim=True)], dim=1)
    with pytest.raises(ScriptedModelError, match="step 2"):
        m(ids)


def test_failure_injection_nan_at():
    m = ScriptedModel("eos_at_step_3", nan_at=1)
    ids = m.prompt()
    assert not torch.isnan(m(ids)).any()
    ids = torch.cat([ids, torch.tensor([[2]])], dim=1)
    assert torch.isnan(m(ids)).all()


def test_running_past_the_script_is_a_clear_error():
    m = ScriptedModel("peaked")
    ids = torch.cat([m.prompt(), torch.tensor([[1]])], dim=1) if m.fixture.prompt_ids else torch.tensor([[1]])
    with pytest.raises(ScriptedModelError, match="scripts 1 steps; asked for step 1"):
        m(ids)


@pytest.mark.parametrize("kwargs,msg", [({"raise_at": -1}, "`raise_at` must be None or an integer >= 0, got -1"),
                                         ({"nan_at": 1.5}, "`nan_at` must be None or an integer >= 0, got 1.5")])
def test_scripted_model_validates(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        ScriptedModel("peaked", **kwargs)


def test_scripted_model_rejects_1d_input():
    with pytest.raises(ValueError, match=r"`input_ids` must be a 2-D tensor \(batch, tokens\), got \(3,\)"):
        ScriptedModel("peaked")(torch.tensor([1, 2, 3]))


def test_fake_clock():
    c = FakeClock(1.0)
    assert c() == 1.0
    assert c.advance(0.5) == 1.5 and c.now() == 1.5
    with pytest.raises(ValueError, match="`seconds` must be >= 0"):
        c.advance(-1)
    with pytest.raises(ValueError, match="`seconds` must be a finite number, got nan"):
        c.advance(math.nan)
    assert course.monotonic() <= course.monotonic()


def test_finish_reason_wire_names():
    assert [str(r) for r in FinishReason] == ["stop", "length", "cancelled", "timeout", "content_filter", "error"]
    assert FinishReason.STOP.is_normal and not FinishReason.LENGTH.is_normal
    assert FinishReason.parse("length") is FinishReason.LENGTH
    assert FinishReason.STOP == "stop"
    with pytest.raises(ValueError, match="`finish_reason` must be one of stop, length"):
        FinishReason.parse("eos")


def test_experiment_record_round_trip():
    r = ExperimentRecord("peaked", {"temperature": 0.7}, seed=3, tokens=[2, 0], text=" cat<eos>",
                         finish_reason="stop")
    assert r.finish_reason is FinishReason.STOP
    back = ExperimentRecord.from_json(r.to_json())
    assert back == r and back.to_dict()["finish_reason"] == "stop"
    with pytest.raises(ValueError, match="`seed` must be an integer or None, got 'x'"):
        ExperimentRecord("peaked", {}, seed="x")


def test_prob_bars_labels_tokens_and_highlights():
    fx = course.load_fixture("stop_string_3_tokens")
    probs = torch.softmax(fx.logits(0), -1)
    ax = prob_bars(probs, fx.vocab, highlight=[2], top=4, title="t")
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == " Sure" and len(labels) == 4
    assert len(ax.patches) == 4
    with pytest.raises(ValueError, match="`probs` must be 1-D"):
        prob_bars(torch.ones(2, 3))
    with pytest.raises(ValueError, match="`vocab` must have 8 entries"):
        prob_bars(torch.ones(8) / 8, ["a"])
    ax2 = line([0.5, 1, 2], [0.1, 0.5, 0.9], xlabel="T", ylabel="H")
    assert ax2.get_xlabel() == "T"
