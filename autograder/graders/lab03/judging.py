"""Judging helpers shared by lab03's tests (grading process only: they use the reference)."""
from __future__ import annotations

import pytest

from autograder.core import Fail, is_raised
from autograder.reference import lab03 as ref

from .probes import CLOCK_START

HINTS = {
    "finish_reason": "Follow the precedence table: cancel, then deadline before each call; after appending: "
                     "content filter, EOS, stop token ids, stop strings, then max_tokens.",
    "tokens": "Append the sampled token before checking any stop condition, and stop as soon as one fires.",
    "raw_output": "raw_output is the text of every generated token, kept for every ending (also "
                  "cancelled, timeout and error).",
    "text": "text is raw_output trimmed: without EOS, without the stop string (unless "
            "include_stop_str_in_output) and without a token the content filter rejected.",
    "stop_reason": "stop_reason is the stop string or stop token id that fired; None for EOS and for "
                   "every other finish reason (vLLM).",
    "usage": 'usage is {"input_tokens": prompt length, "output_tokens": len(tokens)}.',
    "calls": "Call the model exactly once per generated token; check cancel and the deadline before each call.",
}


def label_of(spec):
    bits = [f"{k}={v!r}" for k, v in spec["params"].items()]
    bits += [f"{k}={v!r}" for k, v in (spec.get("inject") or {}).items()]
    return f"{spec['fixture']} ({', '.join(bits)})"


def compare_run(got, exp, label, hint=None):
    r = got["result"]
    if is_raised(r):
        raise Fail(f"{label}: generate raised {r['__raised__']}: {r['message']}",
                   expected=f"finish_reason {exp['finish_reason']!r}",
                   hint=hint or "Nothing that happens during generation may escape the loop: catch it and "
                                "return finish_reason 'error' with the tokens so far.")
    if r["finish_reason"] != exp["finish_reason"]:
        raise Fail(f"{label}: wrong finish_reason", expected=exp["finish_reason"], got=r["finish_reason"],
                   hint=hint or HINTS["finish_reason"])
    for f in ("tokens", "raw_output", "text", "stop_reason", "usage"):
        if r[f] != exp[f] or (f == "tokens" and not all(type(t) is int for t in r[f] or [])) \
                or (f == "stop_reason" and type(r[f]) is not type(exp[f])):
            raise Fail(f"{label}: wrong `{f}`", expected=exp[f], got=r[f], hint=hint or HINTS[f])
    if exp["finish_reason"] == "error" and not (isinstance(r["error"], str) and r["error"]):
        raise Fail(f"{label}: an `error` result must say what went wrong in `error`", got=r["error"],
                   hint="Store the exception text, e.g. f'{type(e).__name__}: {e}'.")
    if exp["error"] is None and r["error"] is not None:
        raise Fail(f"{label}: `error` must be None unless finish_reason is 'error'", expected=None, got=r["error"],
                   hint="Only an `error` ending carries an error text; every other ending leaves `error` None.")
    if got["calls"] != exp["calls"]:
        raise Fail(f"{label}: called the model {got['calls']} times", expected=exp["calls"], got=got["calls"],
                   hint=hint or HINTS["calls"])
    if not got["unchanged"]:
        raise Fail(f"{label}: changed the input_ids tensor it was given", hint="Build a new tensor with torch.cat.")


def judge_runs(obs, specs, hint=None, labels=None):
    if len(obs) != len(specs):
        raise Fail("the probe did not return one observation per run", got=len(obs))
    for i, (spec, got) in enumerate(zip(specs, obs)):
        label = labels[i] if labels else label_of(spec)
        compare_run(got, ref.expected_run(spec, CLOCK_START), label, hint)


def expected_default_run(spec):
    """The reference result of a run spec called with its stopping parameters only (no sampler,
    cancel, clock or content_filter), as ref.expected_run gives it for a full call."""
    model, input_ids, _ = ref.build_run(spec)
    r = ref.generate(model, input_ids, **spec["params"])
    out = {k: v for k, v in r.to_dict().items() if k in ref.FIELDS}
    out["error"] = r.error
    out["calls"] = model.calls
    return out


def case(name, *values, probe, visible=False, fixture=None, hint=None, points=1):
    """One row of a case table: `values` for the test's parameters, the probe call
    (name, *plain args), and the report fields of the case."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, fixture=fixture, hint=hint,
                                                                   points=points)])
