"""latency_metrics and serve_request: the hidden cases of the cells latency_metrics_ttft_tpot and
serve_request_measures_from_arrival."""
from __future__ import annotations

import pytest

import course
from autograder.checks import one_thread, reference_rejects, rejects, result_of
from autograder.core import Fail
from autograder.reference import lab04 as ref
from autograder.toy_models import Recorder, ToyCausalLM, ids

from .judging import case, close, no_calls
from .probes import CLOCK_START, METRIC_KEYS, METRICS, SERVE, TOY_PROMPT

METRICS_CELL = pytest.mark.cell("latency_metrics_ttft_tpot",
                                description="latency_metrics: TTFT, TPOT and end-to-end latency")
SERVE_CELL = pytest.mark.cell("serve_request_measures_from_arrival",
                              description="serve_request: token times on the clock, TTFT from arrival (queue "
                                          "included), TPOT per step")
TPOT_HINT = ("n tokens have n - 1 gaps between them: TPOT = (last - first) / (n - 1). "
             "TTFT = first token time - arrival time.")


# ---------------------------------------------------------------- latency_metrics

@METRICS_CELL
@pytest.mark.parametrize("key, hint", [
    case("five_evenly_spaced_tokens", "five_evenly_spaced_tokens", TPOT_HINT,
         probe=("metrics", "five_evenly_spaced_tokens"), visible=True),
    case("uneven_gaps", "uneven_gaps", TPOT_HINT, probe=("metrics", "uneven_gaps")),
    case("one_token_has_no_tpot", "one_token_has_no_tpot", TPOT_HINT, probe=("metrics", "one_token_has_no_tpot")),
    case("equal_timestamps_allowed", "equal_timestamps_allowed", "Non-decreasing means equal times are allowed (a "
         "first token at the arrival time too): reject only a time that goes BACK.",
         probe=("metrics", "equal_timestamps_allowed")),
])
def test_metrics(observation, key, hint):
    """ttft, tpot = span / (n - 1) (None for one token) and e2e, from the arrival time."""
    with one_thread():
        for (arrival, times), rec in zip(METRICS[key], observation):
            call = f"latency_metrics({arrival!r}, {times!r})"
            got = result_of(rec, call)
            expected = ref.latency_metrics(arrival, times)
            if not isinstance(got, dict) or set(got) != set(METRIC_KEYS):
                raise Fail(f"{call} should return a dict with keys 'ttft', 'tpot', 'e2e'", expected=sorted(expected),
                           got=got if not isinstance(got, dict) else sorted(got))
            for key_ in METRIC_KEYS:
                e, g = expected[key_], got[key_]
                if e is None:
                    if g is not None:
                        raise Fail(f"`{key_}` of a one-token request should be None (no gap between tokens)",
                                   expected=None, got=g, hint="With one token there are zero gaps to average; "
                                                             "the contract says return None.")
                elif not close(g, e):
                    raise Fail(f"`{key_}` of {call} is wrong", expected=e, got=g, hint=hint)


@METRICS_CELL
@pytest.mark.parametrize("key, param", [
    case(key, key, param, probe=("metrics", key))
    for key, param in (("rejects_empty_token_times", "token_times"), ("rejects_time_going_back", "token_times"),
                       ("rejects_negative_arrival", "arrival_time"), ("rejects_token_before_arrival", "token_times"),
                       ("rejects_nan_timestamp", "token_times"))
])
def test_metrics_rejects(observation, key, param):
    """Each bad (arrival, times) raises ValueError naming the parameter and showing the bad value."""
    with one_thread():
        for (arrival, times, shown), rec in zip(METRICS[key], observation):
            call = f"latency_metrics({arrival!r}, {times!r})"
            reference_rejects(ref.latency_metrics, (arrival, times), {}, call)
            rejects(rec, call, param, shown)


# ---------------------------------------------------------------- serve_request

TIMES_HINT = ("Read clock() once right after each token is chosen (after prefill for the first, after each "
              "decode for the rest), e.g. in the on_token callback of generate_cached.")


@SERVE_CELL
@pytest.mark.parametrize("key, keys, hint", [
    case("token_times_on_the_clock", "token_times_on_the_clock", ("tokens", "token_times"), TIMES_HINT,
         probe=("serve", "token_times_on_the_clock"), visible=True),
    case("ttft_includes_queue", "ttft_includes_queue", ("ttft", "e2e"), "TTFT is measured from `arrival_time`, not "
         "from when your loop started: the time the request waited in the queue is part of what the user waits.",
         probe=("serve", "ttft_includes_queue"), visible=True, points=2),
    case("tpot_per_decode_step", "tpot_per_decode_step", ("tpot",), TPOT_HINT, probe=("serve", "tpot_per_decode_step")),
    case("eos_request", "eos_request", ("tokens", "token_times", "ttft", "tpot"), TPOT_HINT,
         probe=("serve", "eos_request")),
    case("single_token_request", "single_token_request", ("tokens", "token_times", "ttft", "tpot"),
         "One token: TTFT as usual, TPOT None.", probe=("serve", "single_token_request")),
])
def test_serve(observation, key, keys, hint):
    """Token times read on the clock, TTFT from arrival_time, TPOT per decode step, e2e."""
    tokens, max_new, arrival, eos = SERVE[key]
    with one_thread():
        got = result_of(observation, f"serve_request(decoder, prompt, {max_new}, arrival_time={arrival!r}, clock)")
        clock = course.FakeClock(CLOCK_START)
        expected = ref.serve_request(Recorder(ToyCausalLM(), clock), ids(tokens), max_new,
                                     arrival_time=arrival, clock=clock, eos_token_id=eos)
        if not isinstance(got, dict):
            raise Fail("should return a dict", expected=sorted(expected), got=got)
        missing = [k for k in keys if k not in got]
        if missing:
            raise Fail(f"the result has no key(s) {missing}", expected=sorted(expected), got=sorted(got))
        for k in keys:
            e, g = expected[k], got[k]
            if k == "tokens":
                ok = g == e
            elif k == "token_times":
                ok = isinstance(g, list) and len(g) == len(e) and all(close(x, y) for x, y in zip(g, e))
            elif e is None:
                ok = g is None
            else:
                ok = close(g, e)
            if not ok:
                raise Fail(f"`{k}` is wrong", expected=e, got=g, hint=hint)


@SERVE_CELL
@pytest.mark.probe("serve", "rejects_arrival_in_the_future")
def test_rejects_arrival_in_the_future(observation):
    """An arrival_time later than clock() raises ValueError naming it, before any model call."""
    with one_thread():
        call = f"serve_request(..., arrival_time={CLOCK_START + 2.5!r}, clock) with clock() = {CLOCK_START!r}"
        clock = course.FakeClock(CLOCK_START)
        reference_rejects(ref.serve_request, (Recorder(ToyCausalLM(), clock), ids(TOY_PROMPT), 3),
                          {"arrival_time": CLOCK_START + 2.5, "clock": clock}, call)
        rejects(observation, call, "arrival_time", CLOCK_START + 2.5,
                "Read clock() once at the start; an arrival_time later than that is impossible: raise ValueError "
                "naming `arrival_time` and showing it.")
        no_calls(observation, call, "arrival_time")
