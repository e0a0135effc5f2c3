"""The engine's spans and counters on the Lab 06 tracer: the hidden cases of the cell
spans_and_metrics_through_the_tracer."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe

from .judging import case, data, expected

pytestmark = pytest.mark.cell("spans_and_metrics_through_the_tracer",
                              description="queue/prefill/decode spans, token events and per-step counters on the "
                                          "Lab 06 tracer")
SPAN_HINT = ("start_request at arrival (it opens `queue`), start_stage 'prefill' when admitted, a token event at "
             "clock() AFTER the forward that chose it, 'decode' after the first token, end_request at the ending.")

PREEMPT_SPAN_HINT = ("When schedule() preempts a request, open its `queue` stage again (engine.stage(req, 'queue', "
                     "clock())): it waits once more, then gets `prefill` and `decode` again when readmitted.")

SEGMENT_HINT = ("Tokens per segment: record a token (engine.trace('token', ...)) before its request's `decode` stage "
                "opens, so a prefill's span counts its first token and the decode's span the rest; a prefill's span "
                "carries the tokens it feeds (engine.stage(req, 'prefill', ...) sets them: all of req.ids, a "
                "recompute's generated tokens too).")


def spans(obs) -> dict:
    """The spans part of a traced run: {"requests": {name: ...}, "open": [...], "counters": {...}}."""
    obs = data(obs)
    if "spans" not in obs:
        raise Fail("no spans were recorded")
    got = obs["spans"]
    if not (isinstance(got, dict) and isinstance(got.get("requests"), dict) and isinstance(got.get("counters"), dict)
            and all(isinstance(r, dict) and isinstance(r.get("metrics"), dict) for r in got["requests"].values())):
        raise Fail("the probe returned an unexpected observation", got=describe(got))
    return got


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@pytest.mark.parametrize("key, trace", [
    case("stages_per_request", "stages", "spans", probe=("trace", "spans"), visible=True),
    case("ttft_tpot_queue_per_request", "metrics", "spans", probe=("trace", "spans"), points=2),
    case("finish_reasons_on_spans", "finish", "spans", probe=("trace", "spans")),
    case("preempted_request_reopens_queue", "stages", "spans_preempt", probe=("trace", "spans_preempt")),
    case("tokens_per_segment", "segments", "spans_preempt", probe=("trace", "spans_preempt")),
])
def test_request_spans(observation, key, trace):
    """No span left open; each request's stages, metrics from its spans, and finish reasons as the
    reference's; a preempted request's stages go back to `queue`, then `prefill` and `decode` again;
    each stage's tokens (fed by a prefill, chosen while it was open) as the reference's."""
    with one_thread():
        got, want = spans(observation), expected(trace)["spans"]
        if got["open"]:
            raise Fail("some requests still have open spans after the trace", got=got["open"],
                       hint="Call tracer.end_request on every ending, abort included.")
        for name in sorted(want["requests"]):
            g = got["requests"].get(name)
            w = want["requests"][name]
            if g is None:
                raise Fail(f"request {name!r} has no spans", hint=SPAN_HINT)
            if key == "metrics":
                for m, e in w["metrics"].items():
                    v = g["metrics"].get(m)
                    if (e is None) != (v is None) or (e is not None and (not _number(v) or abs(v - e) > 1e-9)):
                        raise Fail(f"request {name!r}: `{m}` from its spans is wrong", expected=e, got=v,
                                   hint=SPAN_HINT)
            elif g.get(key) != w[key]:
                raise Fail(f"request {name!r}: `{key}` of its spans differ", expected=w[key], got=g.get(key),
                           hint=SEGMENT_HINT if key == "segments"
                           else PREEMPT_SPAN_HINT if trace == "spans_preempt" else SPAN_HINT)


@pytest.mark.probe("trace", "spans")
def test_counters_per_step(observation):
    """batch_size and kv_blocks_in_use sampled at the end of every step, as the reference does."""
    with one_thread():
        got, want = spans(observation)["counters"], expected("spans")["spans"]["counters"]
        for name in ("batch_size", "kv_blocks_in_use"):
            if got.get(name) != want[name]:
                raise Fail(f"the `{name}` counter samples ([time, value] per step) differ", expected=want[name],
                           got=got.get(name), hint="At the end of every step: tracer.counter('batch_size', "
                                                   "requests in the forward) and tracer.counter('kv_blocks_in_use', "
                                                   "used blocks).")
