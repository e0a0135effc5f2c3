"""course.generation: the production loop, its stop checker, holdback and result type."""
import math
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import course
from course import FakeClock, FinishReason, ScriptedModel
from course.acceptance import InjectedModel
from course.generation import (MAX_STOP_STRINGS, GenerationResult, first_stop, generate, greedy_sampler,
                               holdback_length, seeded_sampler, stream_generate, validate_params)


def run(name, **kw):
    m = ScriptedModel(name)
    return generate(m, m.prompt(), **kw), m


# ---------------------------------------------------------------- endings

def test_eos_is_stop_with_no_stop_reason_and_is_trimmed_from_text_only():
    r, m = run("eos_at_step_3", max_tokens=8)
    assert r.finish_reason is FinishReason.STOP and r.stop_reason is None
    assert r.tokens == [2, 3, 4, 0] and r.text == " the cat sat" and r.raw_output == " the cat sat<eos>"
    assert r.usage == {"input_tokens": 1, "output_tokens": 4} and m.calls == 4


@pytest.mark.parametrize("max_tokens,reason,n", [(1, "length", 1), (3, "length", 3), (4, "stop", 4)])
def test_length_counts_every_token_and_eos_on_the_last_allowed_token_is_stop(max_tokens, reason, n):
    r, m = run("eos_at_step_3", max_tokens=max_tokens)
    assert str(r.finish_reason) == reason and len(r.tokens) == n == m.calls
    if reason == "length":
        assert r.text == r.raw_output


@pytest.mark.parametrize("name,stop_reason,text", [
    ("stop_string_2_tokens", "###", " The answer is 4."),
    ("stop_string_3_tokens", "\nUser:", " Sure, here it is."),
    ("stop_string_overlap", "\n\nQ:", " Answer: 42\n"),
    ("stop_string_inside_token", "\n\n", " one two three"),
])
def test_stop_strings_across_and_inside_tokens(name, stop_reason, text):
    fx = course.load_fixture(name)
    r, _ = run(name, max_tokens=16, stop=fx.params["stop"])
    assert r.finish_reason is FinishReason.STOP and r.stop_reason == stop_reason and r.text == text
    assert r.raw_output.startswith(text + stop_reason)
    inc, _ = run(name, max_tokens=16, stop=fx.params["stop"], include_stop_str_in_output=True)
    assert inc.text == text + stop_reason and inc.tokens == r.tokens


def test_partial_match_that_diverges_does_not_stop():
    r, _ = run("stop_string_diverges", max_tokens=16, stop=["\nUser:"])
    assert r.stop_reason is None and r.text == " Ok.\nUse the map."


def test_stop_token_id_and_the_earliest_completed_stop_string():
    fx = course.load_fixture("stop_string_2_tokens")
    dot = fx.token_id(".")
    r, _ = run("stop_string_2_tokens", max_tokens=16, stop_token_ids=[dot])
    assert r.stop_reason == dot and type(r.stop_reason) is int and r.text == " The answer is 4"
    r, _ = run("stop_string_2_tokens", max_tokens=16, stop_token_ids=[dot], include_stop_str_in_output=True)
    assert r.text == " The answer is 4."
    r, _ = run("stop_string_3_tokens", max_tokens=16, stop=["\nUser:", "."])
    assert r.stop_reason == "." and r.text == " Sure, here it is"


def cancelled_run(name, cancel_at, **kw):
    fx = course.load_fixture(name)
    ev = threading.Event()
    m = InjectedModel(ScriptedModel(fx), prompt_len=len(fx.prompt_ids), cancel=ev, cancel_at=cancel_at)
    return generate(m, torch.tensor([fx.prompt_ids]), cancel=ev, **kw), m


@pytest.mark.parametrize("k", range(11))
def test_cancellation_at_every_step_keeps_the_raw_output(k):
    r, m = cancelled_run("stop_string_3_tokens", k, max_tokens=16, stop=["\nUser:"])
    full, _ = run("stop_string_3_tokens", max_tokens=16, stop=["\nUser:"])
    if k < len(full.tokens):
        assert r.finish_reason is FinishReason.CANCELLED and r.tokens == full.tokens[:k] and m.calls == k
        assert r.raw_output == r.text == course.load_fixture("stop_string_3_tokens").decode(full.tokens[:k])
    else:  # the run had ended before the cancellation could be seen
        assert r == full


def timed(name, seconds_per_call, deadline, cancel_at=None, **kw):
    fx = course.load_fixture(name)
    clock, ev = FakeClock(), threading.Event()
    m = InjectedModel(ScriptedModel(fx), prompt_len=len(fx.prompt_ids), clock=clock, cancel=ev,
                      cancel_at=cancel_at, seconds_per_call=seconds_per_call)
    return generate(m, torch.tensor([fx.prompt_ids]), clock=clock, deadline=deadline, cancel=ev, **kw)


@pytest.mark.parametrize("deadline,n", [(0.6, 3), (0.75, 3), (0.76, 4), (100.0, 9)])
def test_deadline_on_a_fake_clock(deadline, n):
    r = timed("stop_string_3_tokens", 0.25, deadline, max_tokens=16, stop=["\nUser:"])
    assert len(r.tokens) == n
    assert r.finish_reason is (FinishReason.STOP if n == 9 else FinishReason.TIMEOUT)


def test_cancellation_wins_over_an_expired_deadline():
    r = timed("stop_string_3_tokens", 0.25, 0.75, cancel_at=3, max_tokens=16)
    assert r.finish_reason is FinishReason.CANCELLED and len(r.tokens) == 3


@pytest.mark.parametrize("inject,n", [({"raise_at": 2}, 2), ({"nan_at": 1}, 1), ({"raise_at": 0}, 0)])
def test_model_failures_become_error_results(inject, n):
    m = ScriptedModel("eos_at_step_3", **inject)
    r = generate(m, m.prompt(), max_tokens=8)
    assert r.finish_reason is FinishReason.ERROR and len(r.tokens) == n and r.error
    assert r.raw_output == r.text == m.decode(r.tokens)


def test_sampler_failure_is_an_error_too():
    def broken(logits):
        raise RuntimeError("sampler broke")
    m = ScriptedModel("eos_at_step_3")
    r = generate(m, m.prompt(), max_tokens=8, sampler=broken)
    assert r.finish_reason is FinishReason.ERROR and "sampler broke" in r.error


def test_content_filter_withholds_the_rejected_token_but_logs_it():
    r, _ = run("content_filter_banned_word", max_tokens=16, content_filter=lambda t, text: "swordfish" in text)
    assert r.finish_reason is FinishReason.CONTENT_FILTER and r.text == " The password is"
    assert r.raw_output == " The password is swordfish" and len(r.tokens) == 4
    r, _ = run("eos_at_step_3", max_tokens=8, content_filter=lambda t, text: t == 0)  # blocks EOS itself
    assert r.finish_reason is FinishReason.CONTENT_FILTER


def test_inputs_are_not_modified_and_the_result_serialises():
    m = ScriptedModel("eos_at_step_3")
    ids = m.prompt()
    before = ids.clone()
    r = generate(m, ids, max_tokens=8)
    assert torch.equal(ids, before)
    assert isinstance(r, GenerationResult) and r.to_dict()["finish_reason"] == "stop"


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("kw,msg", [
    ({"max_tokens": 0}, "`max_tokens` must be an integer >= 1, got 0."),
    ({"max_tokens": True}, "`max_tokens` must be an integer >= 1, got True."),
    ({"max_tokens": 2.0}, "`max_tokens` must be an integer >= 1, got 2.0."),
    ({"max_tokens": 4, "stop": "###"}, "`stop` must be a list of strings, got '###'."),
    ({"max_tokens": 4, "stop": [3]}, "`stop` must be a list of strings, got [3]."),
    ({"max_tokens": 4, "stop": ["a", ""]}, "`stop` must not contain an empty string"),
    ({"max_tokens": 4, "stop": ["x"] * 17}, "`stop` may hold at most 16 strings, got 17."),
    ({"max_tokens": 4, "stop_token_ids": [-1]}, "`stop_token_ids` must be a list of integers >= 0, got [-1]."),
    ({"max_tokens": 4, "include_stop_str_in_output": 1}, "`include_stop_str_in_output` must be True or False, got 1."),
    ({"max_tokens": 4, "deadline": 0}, "`deadline` must be None or a number of seconds > 0, got 0."),
    ({"max_tokens": 4, "deadline": math.nan}, "`deadline` must be None or a number of seconds > 0, got nan."),
])
def test_validation_names_parameter_and_value_before_any_model_call(kw, msg):
    with pytest.raises(ValueError) as e:
        validate_params(**kw)
    assert msg in str(e.value)
    m = ScriptedModel("eos_at_step_3")
    with pytest.raises(ValueError):
        generate(m, m.prompt(), **kw)
    with pytest.raises(ValueError):
        stream_generate(m, m.prompt(), **kw)  # checked at the call, not at the first next()
    assert m.calls == 0


def test_validation_accepts_boundaries_and_normalises():
    p = validate_params(max_tokens=1, stop=["x"] * MAX_STOP_STRINGS, deadline=1e-3)
    assert p["stop"] == ["x"] * 16 and p["stop_token_ids"] == [] and p["include_stop_str_in_output"] is False
    with pytest.raises(ValueError, match=r"`input_ids` must be a \(1, T\) tensor"):
        generate(ScriptedModel("peaked"), torch.tensor([1]), max_tokens=1)


# ---------------------------------------------------------------- stop matching and holdback

def test_first_stop_prefers_the_earliest_end_then_the_longer_string():
    assert first_stop("the end. ###", ["###", "end"]) == (4, 7, "end")
    assert first_stop("abc", ["bc", "abc"]) == (0, 3, "abc")
    assert first_stop("x\n\n\nQ:", ["\n\nQ:"]) == (2, 6, "\n\nQ:")
    assert first_stop("abc", []) is None and first_stop("abc", ["abd"]) is None


def test_holdback_length_examples():
    assert holdback_length(" Ok.\nUse", ["\nUser:"]) == 4
    assert holdback_length(" Ok.\nUse the", ["\nUser:"]) == 0
    assert holdback_length("42\n\n\n", ["\n\nQ:"]) == 2
    assert holdback_length("ab", ["ab"]) == 0  # a complete match is not held, it is a stop
    assert holdback_length("a#", ["###", "#!"]) == 1 and holdback_length("", ["#"]) == 0


def _brute_holdback(text, stop):
    return max([n for s in stop for n in range(1, len(s)) if len(text) >= n and text.endswith(s[:n])],
               default=0)


@settings(max_examples=300, deadline=None)
@given(st.text("ab#", max_size=12), st.lists(st.text("ab#", min_size=1, max_size=4), max_size=3))
def test_holdback_matches_a_brute_force_definition(text, stop):
    assert holdback_length(text, stop) == _brute_holdback(text, stop)


@settings(max_examples=300, deadline=None)
@given(st.text("ab#", max_size=14), st.lists(st.text("ab#", min_size=1, max_size=4), min_size=1, max_size=3))
def test_first_stop_equals_reading_one_character_at_a_time(text, stop):
    want = None
    for end in range(1, len(text) + 1):
        hits = [s for s in stop if text[:end].endswith(s)]
        if hits:
            s = max(hits, key=len)
            want = (end - len(s), end, s)
            break
    assert first_stop(text, stop) == want


# ---------------------------------------------------------------- streaming

STREAM_CASES = [("stop_string_2_tokens", {}), ("stop_string_3_tokens", {}), ("stop_string_diverges", {}),
                ("stop_string_overlap", {}), ("stop_string_inside_token", {}), ("eos_at_step_3", {}),
                ("stop_string_3_tokens", {"include_stop_str_in_output": True}),
                ("eos_at_step_3", {"max_tokens": 2})]


@pytest.mark.parametrize("name,extra", STREAM_CASES)
def test_stream_joins_to_text_and_holds_back_exactly_the_open_prefix(name, extra):
    fx = course.load_fixture(name)
    kw = {"max_tokens": 16, "stop": fx.params.get("stop"), **extra}
    want, _ = run(name, **kw)
    seen_at_call, got = [], []

    class Spy(ScriptedModel):
        def __call__(self, ids):
            seen_at_call.append("".join(got))
            return super().__call__(ids)

    m = Spy(fx)
    stream = stream_generate(m, m.prompt(), **kw)
    for delta in stream:
        assert isinstance(delta, str) and delta
        got.append(delta)
    assert "".join(got) == want.text and stream.result == want
    hold = [] if kw.get("include_stop_str_in_output") else (kw["stop"] or [])
    for k in range(1, len(seen_at_call)):  # before call k, k tokens' text minus the open prefix was sent
        raw = fx.decode(want.tokens[:k])
        assert seen_at_call[k] == raw[:len(raw) - holdback_length(raw, hold)]


def test_stream_of_a_cancelled_run_flushes_what_it_held():
    fx = course.load_fixture("stop_string_3_tokens")
    ev = threading.Event()
    m = InjectedModel(ScriptedModel(fx), prompt_len=1, cancel=ev, cancel_at=7)  # after "\n"
    s = stream_generate(m, torch.tensor([fx.prompt_ids]), max_tokens=16, stop=["\nUser:"], cancel=ev)
    deltas = list(s)
    assert deltas[-1] == "\n" and s.result.finish_reason is FinishReason.CANCELLED
    assert "".join(deltas) == s.result.text == " Sure, here it is.\n"


def test_samplers():
    assert greedy_sampler(course.load_fixture("ties").logits(0)) == 3
    m = ScriptedModel("stop_string_3_tokens")
    a = generate(m, m.prompt(), max_tokens=5, sampler=seeded_sampler(7))
    m = ScriptedModel("stop_string_3_tokens")
    b = generate(m, m.prompt(), max_tokens=5, sampler=seeded_sampler(7))
    assert a == b
    with pytest.raises(ValueError, match="`seed` must be an integer, got 'x'"):
        seeded_sampler("x")
