"""Graders for lab03 (from logit to finish reason).

Graded API (the docstrings of the stubs in solutions/lab03 are the contract):
  validate_params(*, max_tokens, stop=None, stop_token_ids=None,
                  include_stop_str_in_output=False, deadline=None) -> dict
  first_stop(text, stop) -> (start, end, stop_string) | None
  holdback_length(text, stop) -> int
  generate(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None,
           include_stop_str_in_output=False, sampler=None, cancel=None, clock=None,
           deadline=None, content_filter=None) -> GenerationResult
  stream_generate(model, input_ids, **same) -> iterator of str deltas
  accept_tool_call(result, *, schemas, allowed_tools, executor) -> dict
  accept_with_retries(attempt, *, schemas, allowed_tools, executor, max_attempts=3) -> dict
  replay(spec_or_record) -> GenerationResult;  log_failures(specs, path) -> list[dict]

Every run is described by a *run spec* (course.runs): a fixture, parameters, a seed and
injected failures (raise_at, nan_at, cancel_at, seconds_per_call, banned words / token
ids). Probes build the run from course.runs (`build`: its FakeClock moved on to
CLOCK_START, so a clock never starts at 0) and call the student's code; judges rerun the
same spec with the reference (course.generation, course.acceptance). The probes never
touch those two modules: they hold Lab 03's answers, which must not be in the student's
process. Where a probe needs the course loop's result as an input (accept_tool_call's
result, accept_with_retries' attempts), it reads it from datasets/fixtures/lab03_runs.json
(`course_result`), written from the course loop by datasets/generators/fixtures_lab03_runs.py.

Contract coverage (docstring clause -> the hidden cases that fail when it is broken):

validate_params
  | new dict, five keys, None -> []                      | accepts_and_normalises_valid_params               |
  | bounds are inclusive (1 token, 16 stops, tiny and    | accepts_boundary_values                           |
  |   infinite deadline, id 0)                           |                                                   |
  | max_tokens int (not bool) >= 1                       | rejects_max_tokens_zero, rejects_non_integer_..   |
  | stop: list of str, no bare str, none empty, <= 16    | rejects_a_bare_string_as_stop, rejects_empty_..,  |
  |                                                      | rejects_more_than_16_.., rejects_non_string_..    |
  | stop_token_ids list of ints >= 0                     | rejects_bad_stop_token_ids                        |
  | include_stop_str_in_output True/False only           | rejects_non_bool_include_stop_str                 |
  | deadline number (not bool, not NaN, -inf) > 0        | rejects_bad_deadline                              |
  | message names the parameter and shows the value      | every rejects_* case (checks.rejects)             |
first_stop / holdback_length: every clause of the docstring has a case named after it
  (split across tokens, None, earliest end, equal ends -> longer, overlaps; every prefix,
  diverging, overlapping, several stops, complete match / no stops -> 0).
generate
  | order: cancel, timeout, call, append, filter, EOS,   | eos_is_stop, eos_on_the_last_allowed_token_is_..,|
  |   stop ids, stop strings, length                     | stop_string_on_the_last_allowed_.., cancel_wins.. |
  | length keeps exactly max_tokens                      | max_tokens_gives_length, length_keeps_exactly_..  |
  | stop strings across/inside tokens, earliest, include | stop_string_split_.., overlapping_.., inside_..,  |
  |                                                      | include_stop_str_in_output, earliest_of_several.. |
  | stop_token_ids -> stop_reason id                     | stop_token_id_sets_stop_reason                    |
  | validation before any model call                     | rejects_bad_params_before_calling_the_model       |
  | cancel checked before every call                     | cancelled_before_.., cancel_at_every_step, ..late |
  | deadline from generate's start (clock at 1000), >=   | deadline_hit_mid_way, deadline_reached_exactly,   |
  |                                                      | deadline_not_reached                              |
  | model error / NaN logits -> error, never raised      | model_error_is_recorded, error_on_the_first_call, |
  |                                                      | nan_logits_are_an_error                           |
  | content filter on text / on a token (EOS included)   | content_filter_on_text, content_filter_on_token   |
stream_generate
  | never sends a held stop prefix while running         | two/three_token_stop_never_leaks, stop_inside_..  |
  | releases text that can no longer match               | diverging_match_is_released, overlapping_prefix.. |
  | final flush = rest of generate().text                | cancelled_or_failed_stream_flushes_held_text,     |
  |                                                      | stream_equals_generate_on_every_fixture           |
  | no holdback with include_stop_str_in_output          | include_stop_str_needs_no_holdback                |
accept_tool_call: one case per stage and per rejection kind (finish_reason length/
  cancelled/timeout/filter, parse, schema envelope and args via jsonschema, permission,
  executor failure), the executor runs only on acceptance, the error names the problem.
accept_with_retries: retried kinds, never-retried kinds, the limit, reasons passed on,
  max_attempts validated (rejects_bad_max_attempts).
replay / log_failures
  | replay uses every injection and the seed             | replay_reproduces_.., replay_handles_every_inj..  |
  | only non-stop endings logged, in order               | only_abnormal_endings_are_logged                  |
  | a record holds the spec and the outcome              | records_hold_what_replay_needs                    |
  | appends (two calls, one file), returns what it wrote | saved_file_equals_returned_records                |
  | replay(record read back from JSON) reproduces it     | replaying_each_saved_failure_gives_the_same_..    |
"""
from __future__ import annotations

import copy
import functools
import json
import os
import tempfile
import threading
from enum import Enum

import torch

import course
from course.fixtures import FIXTURES_DIR
from course.runs import (ALLOWED_TOOLS, INJECT_DEFAULTS, TOOL_SCHEMAS, GenerationResult, InjectedModel,
                         RecordingExecutor, greedy_sampler, seeded_sampler)

from ..checks import Input, call_probe, rejects, rejects_case, result_of
from ..core import Case, Fail, Test, describe, function, is_raised, raised
from ..reference import lab03 as ref

LAB = "lab03"

API = {
    "validate_params": "(*, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False, "
                       "deadline=None)",
    "first_stop": "(text, stop)",
    "holdback_length": "(text, stop)",
    "generate": "(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False, "
                "sampler=None, cancel=None, clock=None, deadline=None, content_filter=None)",
    "stream_generate": "(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None, "
                       "include_stop_str_in_output=False, sampler=None, cancel=None, clock=None, deadline=None, "
                       "content_filter=None)",
    "accept_tool_call": "(result, *, schemas, allowed_tools, executor)",
    "accept_with_retries": "(attempt, *, schemas, allowed_tools, executor, max_attempts=3)",
    "replay": "(record)",
    "log_failures": "(specs, path)",
}
RESULT_FIELDS = ("tokens", "text", "finish_reason", "stop_reason", "usage", "raw_output", "error")


def S(fixture, inject=None, seed=None, **params):
    """A run spec."""
    spec = {"fixture": fixture, "params": params, "seed": seed}
    if inject:
        spec["inject"] = inject
    return spec


STOP3 = {"max_tokens": 16, "stop": ["\nUser:"]}
CLOCK_START = 1000.0   # a run's clock does not start at 0: the deadline counts from generate's start


def build(spec):
    """(model, input_ids, kwargs) for generate(model, input_ids, **kwargs) from a run spec,
    its FakeClock moved on to CLOCK_START; the judges run the reference on the same run:
    ref.expected_run(spec, CLOCK_START), built by course.acceptance.build_run.

    Built here from course.runs because course.acceptance, which holds Lab 03's answers
    (build_run is most of `replay`), is out of reach where probes run;
    autograder/tests/test_lab03_runs.py proves both builds give the same runs."""
    inject = {**INJECT_DEFAULTS, **copy.deepcopy(spec.get("inject") or {})}
    fx = course.load_fixture(spec["fixture"])
    prompt = spec.get("prompt_ids")
    clock, cancel = course.FakeClock(), threading.Event()
    model = InjectedModel(course.ScriptedModel(fx, raise_at=inject["raise_at"], nan_at=inject["nan_at"]),
                          prompt_len=len(fx.prompt_ids), cancel=cancel, cancel_at=inject["cancel_at"],
                          clock=clock, seconds_per_call=inject["seconds_per_call"])
    words, ids = list(inject["banned_words"]), set(inject["banned_token_ids"])
    content_filter = None
    if words or ids:
        def content_filter(token_id, text):
            return token_id in ids or any(w in text for w in words)
    seed = spec.get("seed")
    kwargs = dict(copy.deepcopy(spec.get("params") or {}),
                  sampler=greedy_sampler if seed is None else seeded_sampler(seed),
                  cancel=cancel, clock=clock, content_filter=content_filter)
    clock.advance(CLOCK_START)
    input_ids = torch.tensor([list(fx.prompt_ids if prompt is None else prompt)], dtype=torch.long)
    return model, input_ids, kwargs


RUNS_FILE = FIXTURES_DIR / "lab03_runs.json"


def run_key(spec) -> str:
    """A run spec as one canonical string (the key of lab03_runs.json)."""
    return json.dumps(spec, sort_keys=True)


@functools.lru_cache(maxsize=1)
def _course_runs() -> dict:
    data = json.loads(RUNS_FILE.read_text(encoding="utf-8"))
    return {run_key(r["spec"]): r["result"] for r in data["runs"]}


def course_result(spec) -> GenerationResult:
    """The course loop's result of a run spec, as a fresh GenerationResult read from
    lab03_runs.json (a probe's input, so an accept test does not depend on the student's
    generate, and no answer code runs in the student's process)."""
    found = _course_runs().get(run_key(spec))
    if found is None:
        raise RuntimeError(f"no course result for the run spec {run_key(spec)} in {RUNS_FILE.name}: "
                           "add it to COURSE_RUN_SPECS and run `make fixtures`")
    return GenerationResult.from_dict(found)
DOT = course.load_fixture("stop_string_2_tokens").token_id(".")
IS = course.load_fixture("content_filter_banned_word").token_id(" is")


# ---------------------------------------------------------------- plain views of student results

def plain_result(r) -> dict:
    """Read a result object (attributes, or a dict) into plain data; enums become wire names."""
    out = {}
    for f in RESULT_FIELDS:
        if isinstance(r, dict):
            if f not in r and f != "error":
                raise Fail(f"the result has no `{f}`", hint="Return a GenerationResult with every field filled in.")
            v = r.get(f)
        else:
            if not hasattr(r, f) and f != "error":
                raise Fail(f"the result has no attribute `{f}` (got a {type(r).__name__})",
                           hint="Return a GenerationResult(tokens=..., text=..., finish_reason=..., ...).")
            v = getattr(r, f, None)
        if isinstance(v, Enum):
            v = v.value
        if f == "tokens" and hasattr(v, "tolist"):
            v = v.tolist()
        out[f] = v
    return out


def _call_generate(ns, spec):
    fn = function(ns, "generate")
    model, input_ids, kwargs = build(spec)
    before = input_ids.clone()
    try:
        r = fn(model, input_ids, **kwargs)
    except NotImplementedError:  # a stub: reported as 'not implemented yet'
        raise
    except Exception as e:
        return {"result": raised(e), "calls": model.calls, "unchanged": bool((input_ids == before).all())}
    return {"result": plain_result(r), "calls": model.calls,
            "unchanged": bool(input_ids.shape == before.shape and (input_ids == before).all())}


def probe_runs(specs):
    def probe(ns):
        return [_call_generate(ns, s) for s in specs]
    return probe


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


def _compare_run(got, exp, label, hint=None):
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
    if got["calls"] != exp["calls"]:
        raise Fail(f"{label}: called the model {got['calls']} times", expected=exp["calls"], got=got["calls"],
                   hint=hint or HINTS["calls"])
    if not got["unchanged"]:
        raise Fail(f"{label}: changed the input_ids tensor it was given", hint="Build a new tensor with torch.cat.")


def judge_runs(specs, hint=None, labels=None):
    def judge(obs):
        if len(obs) != len(specs):
            raise Fail("the probe did not return one observation per run", got=len(obs))
        for i, (spec, got) in enumerate(zip(specs, obs)):
            label = labels[i] if labels else _label(spec)
            _compare_run(got, ref.expected_run(spec, CLOCK_START), label, hint)
    return judge


def _label(spec):
    bits = [f"{k}={v!r}" for k, v in spec["params"].items()]
    bits += [f"{k}={v!r}" for k, v in (spec.get("inject") or {}).items()]
    return f"{spec['fixture']} ({', '.join(bits)})"


def run_case(name, points, specs, *, hint=None, visible=False, labels=None):
    specs = specs if isinstance(specs, list) else [specs]
    return Case(name, points, probe_runs(specs), judge_runs(specs, hint, labels), visible=visible,
                fixture=specs[0]["fixture"], hint=hint)


# ---------------------------------------------------------------- validate_params

def probe_params(calls):
    return call_probe("validate_params", [Input("", lambda: (), kw) for kw in calls])


def judge_accepts(calls):
    def judge(obs):
        for kw, rec in zip(calls, obs):
            exp = ref.validate_params(**copy.deepcopy(kw))
            v = result_of(rec, f"validate_params({_kw(kw)}) is valid but", expected=exp)
            if v != exp:
                raise Fail(f"validate_params({_kw(kw)}) returned the wrong normalised dict", expected=exp, got=v,
                           hint="Return all five keys; None stop / stop_token_ids become [].")
    return judge


def _kw(kw):
    text = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    return text if len(text) < 90 else text[:87] + "..."


def reject_case(name, param, calls, *, visible=False):
    """Each call must raise ValueError naming `param` and showing its value (in any reasonable
    form: the value, the offending item, a list's length; see checks.value_forms)."""
    return rejects_case(name, "validate_params", [(param, Input("", lambda: (), kw)) for kw in calls],
                        visible=visible, reference=lambda **kw: ref.validate_params(**kw))


MT = {"max_tokens": 8}
INF = float("inf")
BOUNDARY = [{"max_tokens": 1, "stop": [f"s{i}" for i in range(16)], "deadline": 0.001, "stop_token_ids": [0],
             "include_stop_str_in_output": True}, {"max_tokens": 1, "stop": []}, {"max_tokens": 5, "deadline": 3},
            {"max_tokens": 5, "deadline": INF}]   # inf is a number > 0, not NaN: no deadline at all
PARAM_TESTS = (
    Case("accepts_and_normalises_valid_params", 1,
         probe_params([{"max_tokens": 8, "stop": ["###"]}, {"max_tokens": 8}]),
         judge_accepts([{"max_tokens": 8, "stop": ["###"]}, {"max_tokens": 8}]), visible=True),
    reject_case("rejects_max_tokens_zero", "max_tokens", [{"max_tokens": 0}], visible=True),
    Case("accepts_boundary_values", 1, probe_params(BOUNDARY), judge_accepts(BOUNDARY)),
    reject_case("rejects_non_integer_max_tokens", "max_tokens",
                [{"max_tokens": 2.5}, {"max_tokens": True}, {"max_tokens": "8"}, {"max_tokens": -3}]),
    reject_case("rejects_a_bare_string_as_stop", "stop", [{**MT, "stop": "###"}]),
    reject_case("rejects_empty_stop_strings", "stop", [{**MT, "stop": [""]}, {**MT, "stop": ["ok", ""]}]),
    reject_case("rejects_more_than_16_stop_strings", "stop", [{**MT, "stop": [f"s{i}" for i in range(17)]}]),
    reject_case("rejects_non_string_stop_items", "stop", [{**MT, "stop": [3]}, {**MT, "stop": ["a", None]}]),
    reject_case("rejects_bad_deadline", "deadline",
                [{**MT, "deadline": 0}, {**MT, "deadline": -1.5}, {**MT, "deadline": float("nan")},
                 {**MT, "deadline": -INF}, {**MT, "deadline": True}, {**MT, "deadline": "1"}]),
    reject_case("rejects_bad_stop_token_ids", "stop_token_ids",
                [{**MT, "stop_token_ids": [-1]}, {**MT, "stop_token_ids": 3}, {**MT, "stop_token_ids": [1.5]}]),
    reject_case("rejects_non_bool_include_stop_str", "include_stop_str_in_output",
                [{**MT, "include_stop_str_in_output": 1}, {**MT, "include_stop_str_in_output": "yes"}]),
)


# ---------------------------------------------------------------- first_stop and holdback_length

def probe_fn_calls(name, args_list):
    def probe(ns):
        fn = function(ns, name)
        out = []
        for args in args_list:
            try:
                v = fn(*copy.deepcopy(args))
                out.append(list(v) if isinstance(v, tuple) else v)
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:
                out.append(raised(e))
        return out
    return probe


def judge_fn_calls(name, args_list, hint):
    def judge(obs):
        for args, got in zip(args_list, obs):
            exp = getattr(ref, name)(*args)
            exp = list(exp) if isinstance(exp, tuple) else exp
            if is_raised(got):
                raise Fail(f"{name}{tuple(args)!r} raised {got['__raised__']}: {got['message']}", expected=exp, hint=hint)
            if got != exp or type(got) is not type(exp):
                raise Fail(f"{name}{tuple(args)!r} is wrong", expected=exp, got=got, hint=hint)
    return judge


def fn_case(fn_name, name, points, args_list, hint, visible=False, fixture=None):
    return Case(name, points, probe_fn_calls(fn_name, args_list), judge_fn_calls(fn_name, args_list, hint),
                visible=visible, fixture=fixture, hint=hint)


def prefixes(text, stop):
    return [(text[:i], stop) for i in range(len(text) + 1)]


R3 = " Sure, here it is.\nUser:"
RDIV = " Ok.\nUse the map."
ROVL = " Answer: 42\n\n\nQ:"
FIRST_STOP_TESTS = (
    fn_case("first_stop", "finds_a_stop_string_split_across_tokens", 1, [(R3, ["\nUser:"])],
            "Search the whole text so far, not only the newest token.", visible=True,
            fixture="stop_string_3_tokens"),
    fn_case("first_stop", "returns_none_without_a_match", 1,
            [(RDIV, ["\nUser:"]), ("abc", []), ("", ["#"])],
            "Return None when no stop string occurs (and for an empty stop list).", visible=True),
    fn_case("first_stop", "earliest_end_wins", 1,
            [("the end. ###", ["###", "end"]), ("xx ## yy", ["yy", "##"]), ("a.b!", ["!", "."])],
            "The match that completes first (smallest end index) wins, whatever its place in `stop`."),
    fn_case("first_stop", "equal_ends_prefer_the_longer_string", 1,
            [("abc", ["bc", "abc"]), ("xabc", ["c", "abc", "bc"])],
            "When two matches end at the same index, the longer one (smaller start) wins."),
    fn_case("first_stop", "first_occurrence_and_overlaps", 1,
            [("a## b##", ["##"]), (ROVL, ["\n\nQ:"]), ("###", ["###"]), ("aaab", ["aab"])],
            "Use the first occurrence; a match may start inside a run of repeated characters."),
)

HOLDBACK_TESTS = (
    fn_case("holdback_length", "every_prefix_of_a_three_token_stop", 1, prefixes(R3, ["\nUser:"]),
            "Hold back the longest suffix that is a proper prefix of a stop string.", visible=True,
            fixture="stop_string_3_tokens"),
    fn_case("holdback_length", "every_prefix_of_a_diverging_match", 1, prefixes(RDIV, ["\nUser:"]),
            "Once the text can no longer continue into the stop string, hold back nothing.",
            fixture="stop_string_diverges"),
    fn_case("holdback_length", "every_prefix_with_overlapping_newlines", 1, prefixes(ROVL, ["\n\nQ:"]),
            "After three newlines only the last two can start '\\n\\nQ:': try every suffix length.",
            fixture="stop_string_overlap"),
    fn_case("holdback_length", "several_stop_strings_take_the_longest", 1,
            prefixes(" x#\nUs##", ["###", "\nUser:"]) + prefixes("xaaab", ["ab", "aab"]),
            "Take the maximum over all stop strings, and the longest suffix for each."),
    fn_case("holdback_length", "nothing_held_without_a_possible_match", 1,
            prefixes("abc", []) + [("###", ["###"]), ("x", ["x"]), ("abc", ["bd"]), ("abc", ["abc"])],
            "A complete stop string is a match, not a prefix: only proper prefixes are held; no stops, no holdback."),
)


# ---------------------------------------------------------------- generate

GENERATE_STOP_TESTS = (
    run_case("eos_is_stop", 1, S("eos_at_step_3", max_tokens=8), visible=True),
    run_case("max_tokens_gives_length", 1, S("eos_at_step_3", max_tokens=2), visible=True),
    run_case("stop_string_split_across_two_tokens", 1, S("stop_string_2_tokens", max_tokens=16, stop=["###"]),
             visible=True),
    run_case("eos_on_the_last_allowed_token_is_stop", 1, S("eos_at_step_3", max_tokens=4),
             hint="Check EOS before max_tokens: the model finished, so the output is complete."),
    run_case("length_keeps_exactly_max_tokens", 2, [S("stop_string_3_tokens", max_tokens=k) for k in range(1, 9)]
             + [S("eos_at_step_3", max_tokens=1)],
             hint="Append the token first, then compare len(tokens) with max_tokens: max_tokens=k gives k tokens."),
    run_case("stop_string_split_across_three_tokens", 1, S("stop_string_3_tokens", **STOP3),
             hint="Look for stop strings in the whole raw text, not only in the newest token."),
    run_case("partial_match_that_diverges_does_not_stop", 1, S("stop_string_diverges", **STOP3),
             hint="'\\nUse' is only a prefix of '\\nUser:'; stop only on a complete match."),
    run_case("overlapping_stop_prefix", 1, S("stop_string_overlap", max_tokens=16, stop=["\n\nQ:"])),
    run_case("stop_string_inside_one_token", 1, S("stop_string_inside_token", max_tokens=16, stop=["\n\n"]),
             hint="Cut the text at the match; what follows it in the same token is dropped."),
    run_case("include_stop_str_in_output", 1,
             [S("stop_string_3_tokens", include_stop_str_in_output=True, **STOP3),
              S("stop_string_inside_token", max_tokens=16, stop=["\n\n"], include_stop_str_in_output=True)],
             hint="With include_stop_str_in_output the text ends right after the stop string."),
    run_case("stop_token_id_sets_stop_reason", 1,
             [S("stop_string_2_tokens", max_tokens=16, stop_token_ids=[DOT]),
              S("stop_string_2_tokens", max_tokens=16, stop_token_ids=[DOT], include_stop_str_in_output=True)],
             hint="A stop token id ends with stop_reason = that id (an int); its text is dropped unless "
                  "include_stop_str_in_output."),
    run_case("earliest_of_several_stop_strings", 1,
             S("stop_string_3_tokens", max_tokens=16, stop=["\nUser:", "."])),
    run_case("stop_string_on_the_last_allowed_token_is_stop", 1,
             S("stop_string_3_tokens", max_tokens=9, stop=["\nUser:"]),
             hint="Check stop strings before max_tokens."),
)


def probe_generate_validates(ns):
    fn = function(ns, "generate")
    out = []
    for kw in ({"max_tokens": 0}, {"max_tokens": 4, "stop": "###"}, {"max_tokens": 4, "stop": [""]},
               {"max_tokens": 4, "deadline": 0}, {"max_tokens": 4, "stop": ["x"] * 17}):
        m = course.ScriptedModel("eos_at_step_3")
        try:
            fn(m, m.prompt(), **kw)
            out.append({"raised": None, "calls": m.calls})
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            out.append({"raised": raised(e), "calls": m.calls})
    return out


def judge_generate_validates(obs):
    for got in obs:
        if got["raised"] is None or not got["raised"]["is_value_error"]:
            raise Fail("generate must raise ValueError for invalid parameters (they are the caller's bug, "
                       "not a generation failure)", got=describe(got["raised"]),
                       hint="Call validate_params(...) at the top of generate, before the loop.")
        if got["calls"]:
            raise Fail("generate called the model before rejecting invalid parameters", got=got["calls"],
                       expected=0, hint="Validate first, then start the loop.")


GENERATE_STOP_TESTS += (
    Case("rejects_bad_params_before_calling_the_model", 1, probe_generate_validates, judge_generate_validates),
)

GENERATE_ABNORMAL_TESTS = (
    run_case("cancelled_before_the_first_call", 1, S("stop_string_3_tokens", {"cancel_at": 0}, **STOP3),
             visible=True, hint="Check cancel.is_set() before every model call, the first one included."),
    run_case("model_error_is_recorded", 1, S("eos_at_step_3", {"raise_at": 2}, max_tokens=8), visible=True),
    run_case("deadline_hit_mid_way", 1,
             S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=0.6, **STOP3), visible=True,
             hint="Before each call, compare clock() - start with the deadline."),
    run_case("cancel_at_every_step", 3,
             [S("stop_string_3_tokens", {"cancel_at": k}, **STOP3) for k in range(11)],
             labels=[f"cancel after {k} tokens" for k in range(11)],
             hint="A cancellation seen before call k keeps the k tokens and their raw text; one that arrives "
                  "after the run ended changes nothing."),
    run_case("cancel_during_the_last_call_is_too_late", 1,
             [S("eos_at_step_3", {"cancel_at": 3}, max_tokens=3), S("eos_at_step_3", {"cancel_at": 4}, max_tokens=8)],
             hint="A run that ended with length or stop is finished; cancellation is only checked before a call."),
    run_case("deadline_reached_exactly", 1,
             S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=0.75, **STOP3),
             hint="The deadline has passed when clock() - start >= deadline (not only >)."),
    run_case("deadline_not_reached", 1,
             S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=100.0, **STOP3)),
    run_case("cancel_wins_over_timeout", 1,
             S("stop_string_3_tokens", {"seconds_per_call": 0.25, "cancel_at": 3}, deadline=0.75, **STOP3),
             hint="Check cancellation before the deadline."),
    run_case("error_on_the_first_call", 1, S("eos_at_step_3", {"raise_at": 0}, max_tokens=8)),
    run_case("nan_logits_are_an_error", 1,
             [S("eos_at_step_3", {"nan_at": 1}, max_tokens=8), S("stop_string_3_tokens", {"nan_at": 0}, **STOP3)],
             hint="NaN logits mean a broken model: end with finish_reason 'error', never emit a token from them."),
    run_case("content_filter_on_text", 1,
             S("content_filter_banned_word", {"banned_words": ["swordfish"]}, max_tokens=16),
             hint="Call content_filter(token, raw_text) after appending; if it blocks, the token stays in tokens "
                  "and raw_output but not in text."),
    run_case("content_filter_on_token", 1,
             [S("content_filter_banned_word", {"banned_token_ids": [IS]}, max_tokens=16),
              S("eos_at_step_3", {"banned_token_ids": [0]}, max_tokens=8)],
             hint="The filter runs before the EOS check, so it can block any token, EOS included."),
)


# ---------------------------------------------------------------- stream_generate

class _Spy:
    """Model wrapper that notes what the consumer had received when each call began."""

    def __init__(self, model, received):
        self.model, self.received, self.seen = model, received, []

    vocab = property(lambda self: self.model.vocab)
    vocab_size = property(lambda self: self.model.vocab_size)
    eos_token_id = property(lambda self: self.model.eos_token_id)

    def decode(self, ids):
        return self.model.decode(ids)

    def __call__(self, input_ids):
        self.seen.append("".join(self.received))
        return self.model(input_ids)


def probe_streams(specs):
    def probe(ns):
        fn = function(ns, "stream_generate")
        out = []
        for spec in specs:
            model, input_ids, kwargs = build(spec)
            received, at_yield, bad = [], [], []
            spy = _Spy(model, received)
            try:
                for delta in fn(spy, input_ids, **kwargs):
                    if type(delta) is not str:
                        bad.append(type(delta).__name__)
                        delta = str(delta)
                    received.append(delta)
                    at_yield.append(len(spy.seen))
                    if len(received) > 2000:
                        break
                err = None
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:
                err = raised(e)
            out.append({"deltas": list(received), "at_yield": at_yield, "seen": spy.seen, "bad": bad,
                        "raised": err})
        return out
    return probe


def judge_streams(specs, hint=None):
    def judge(obs):
        for spec, got in zip(specs, obs):
            label = _label(spec)
            exp = ref.expected_run(spec, CLOCK_START)
            safe = ref.safe_emissions(spec)
            if got["raised"] is not None:
                raise Fail(f"{label}: the stream raised {got['raised']['__raised__']}: {got['raised']['message']}",
                           hint="Errors during generation end the stream normally (finish_reason 'error').")
            if got["bad"]:
                raise Fail(f"{label}: every delta must be a str", got=got["bad"][0])
            sent = ""
            for delta, calls in zip(got["deltas"], got["at_yield"]):
                sent += delta
                allowed = safe[calls] if calls < exp["calls"] and calls < len(safe) else exp["text"]
                if not allowed.startswith(sent):
                    if calls >= exp["calls"]:  # the run is over: this is the final flush
                        raise Fail(f"{label}: when the run ended, the stream sent text that is not in "
                                   f"generate(...).text", expected=f"a prefix of {allowed!r}", got=sent,
                                   hint="The final flush sends only the rest of the FINAL text: trimmed at the "
                                        "stop string (or the blocked token), not the held raw text.")
                    raise Fail(f"{label}: after {calls} model calls the stream had sent text it may not send yet",
                               expected=f"a prefix of {allowed!r}", got=sent,
                               hint=hint or "Hold back the longest suffix of the raw text that is a proper prefix "
                                            "of a stop string, over all tokens so far (not just the last).")
            if "".join(got["deltas"]) != exp["text"]:
                raise Fail(f"{label}: the joined deltas differ from generate(...).text", expected=exp["text"],
                           got="".join(got["deltas"]),
                           hint=hint or "At the end, send whatever is left of the final text (held text included).")
            if len(got["seen"]) != exp["calls"]:
                raise Fail(f"{label}: the stream called the model {len(got['seen'])} times", expected=exp["calls"],
                           got=len(got["seen"]), hint=HINTS["calls"])
            for k, seen in enumerate(got["seen"]):
                if seen != safe[k]:
                    raise Fail(f"{label}: before model call {k} the client had received {seen!r}",
                               expected=safe[k], got=seen,
                               hint=hint or "Yield each token's safe text before asking the model for the next "
                                            "token, and release held text as soon as it cannot start a stop string.")
    return judge


def stream_case(name, points, specs, *, hint=None, visible=False):
    specs = specs if isinstance(specs, list) else [specs]
    return Case(name, points, probe_streams(specs), judge_streams(specs, hint), visible=visible,
                fixture=specs[0]["fixture"], hint=hint)


def _fixture_specs():
    out = []
    for name in ("eos_at_step_3", "stop_string_2_tokens", "stop_string_3_tokens", "stop_string_diverges",
                 "stop_string_overlap", "stop_string_inside_token", "json_tool_call_ok", "json_cut_by_max_tokens",
                 "tool_call_transfer", "transfer_cut_by_max_tokens", "content_filter_banned_word"):
        p = dict(course.load_fixture(name).params)
        words = p.pop("banned_words", None)
        out.append(S(name, {"banned_words": words} if words else None, **p))
    return out


STREAM_TESTS = (
    stream_case("two_token_stop_never_leaks", 1, S("stop_string_2_tokens", max_tokens=16, stop=["###"]),
                visible=True),
    stream_case("three_token_stop_never_leaks", 1, S("stop_string_3_tokens", **STOP3)),
    stream_case("diverging_match_is_released", 1, S("stop_string_diverges", **STOP3),
                hint="When '\\nUse' is followed by ' the', it can no longer become '\\nUser:': send it right away."),
    stream_case("overlapping_prefix_held_exactly", 1, S("stop_string_overlap", max_tokens=16, stop=["\n\nQ:"])),
    stream_case("stop_inside_one_token", 1, S("stop_string_inside_token", max_tokens=16, stop=["\n\n"])),
    stream_case("eos_and_length_streams", 1, [S("eos_at_step_3", max_tokens=8), S("eos_at_step_3", max_tokens=2),
                                              S("stop_string_3_tokens", max_tokens=8, stop=["\nUser:"])]),
    stream_case("include_stop_str_needs_no_holdback", 1,
                S("stop_string_3_tokens", include_stop_str_in_output=True, **STOP3),
                hint="With include_stop_str_in_output nothing can be trimmed later, so nothing is held."),
    stream_case("cancelled_or_failed_stream_flushes_held_text", 1,
                [S("stop_string_3_tokens", {"cancel_at": 7}, **STOP3),
                 S("stop_string_3_tokens", {"raise_at": 8}, **STOP3)],
                hint="A run that ends without a stop string shows the held text: send it before finishing."),
    stream_case("stream_equals_generate_on_every_fixture", 2, _fixture_specs()),
)


# ---------------------------------------------------------------- accept_tool_call

OK = S("json_tool_call_ok", max_tokens=32)
CUT = S("json_cut_by_max_tokens", max_tokens=6)
CANCEL_HALF = S("json_tool_call_ok", {"cancel_at": 9}, max_tokens=32)
REPAIRABLE = [S("transfer_cut_by_max_tokens", max_tokens=20),
              S("json_tool_call_ok", {"cancel_at": 16}, max_tokens=32),
              S("tool_call_transfer", {"raise_at": 21}, max_tokens=32)]
COMPLETE_NO_EOS = S("json_tool_call_ok", max_tokens=17)
TIMEOUT = S("tool_call_transfer", {"seconds_per_call": 0.1}, max_tokens=32, deadline=1.0)
FILTERED = S("tool_call_transfer", {"banned_words": ["alice"]}, max_tokens=32)
BAD_JSON = S("tool_call_bad_json", max_tokens=32)
ENUM = S("tool_call_enum_violation", max_tokens=32)
RANGE = S("tool_call_out_of_range", max_tokens=32)
FORBIDDEN = S("tool_call_not_permitted", max_tokens=32)
NO_DELETE = {k: v for k, v in TOOL_SCHEMAS.items() if k != "delete_file"}
STRICT = [{"get_weather": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[a-z]+$"}}}},
          {"get_weather": {"type": "object", "required": ["city", "units"]}}]


def _plain_decision(d):
    if not isinstance(d, dict):
        raise Fail(f"accept_tool_call should return a dict, got {type(d).__name__}",
                   hint='Return {"ok": ..., "stage": ..., "error": ..., "raw_output": ..., ...}.')
    missing = [k for k in ("ok", "stage", "error", "raw_output") if k not in d]
    if missing:
        raise Fail(f"the decision has no {missing}", hint="Keep every key of the contract.")
    out = {k: d[k] for k in ("ok", "stage", "error", "raw_output")}
    if isinstance(out["stage"], Enum):
        out["stage"] = out["stage"].value
    return out


def probe_accepts(specs, schemas=None, allowed=None, fail_with=None):
    def probe(ns):
        fn = function(ns, "accept_tool_call")
        out = []
        for spec in specs:
            ex = RecordingExecutor(fail_with=fail_with)
            result = course_result(spec)  # the course loop's result: this test does not depend on generate
            try:
                d = _plain_decision(fn(result, schemas=copy.deepcopy(schemas or TOOL_SCHEMAS),
                                       allowed_tools=list(ALLOWED_TOOLS if allowed is None else allowed),
                                       executor=ex))
            except Fail:
                raise
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:
                d = raised(e)
            out.append({"decision": d, "calls": [[t, a] for t, a in ex.calls]})
        return out
    return probe


def judge_accepts_tool(specs, mentions=None, schemas=None, allowed=None, fail_with=None, hint=None):
    def judge(obs):
        for i, (spec, got) in enumerate(zip(specs, obs)):
            label = _label(spec)
            exp = ref.expected_decision(spec, schemas=schemas, allowed_tools=allowed, fail_with=fail_with)
            d, e = got["decision"], exp["decision"]
            if is_raised(d):
                raise Fail(f"{label}: accept_tool_call raised {d['__raised__']}: {d['message']}",
                           expected=f"a rejection at stage {e['stage']!r}",
                           hint="Every rejection is returned as a decision with a readable error, never raised.")
            if got["calls"] != exp["calls"]:
                raise Fail(f"{label}: the executor ran {len(got['calls'])} time(s)", expected=exp["calls"],
                           got=got["calls"], hint=hint or "Run the side effect only after every stage has passed, "
                                                          "and never for a finish reason other than 'stop'.")
            if d["stage"] != e["stage"] or d["ok"] is not e["ok"]:
                raise Fail(f"{label}: wrong stage / ok", expected={"stage": e["stage"], "ok": e["ok"]},
                           got={"stage": d["stage"], "ok": d["ok"]},
                           hint=hint or "The order is finish_reason -> parse -> schema -> permission -> execute.")
            if d["raw_output"] != e["raw_output"]:
                raise Fail(f"{label}: the decision must carry the result's raw_output", expected=e["raw_output"],
                           got=d["raw_output"])
            if e["error"] is None:
                if d["error"] is not None:
                    raise Fail(f"{label}: an accepted call has error None", got=d["error"])
                continue
            if not isinstance(d["error"], str) or len(d["error"]) < 10:
                raise Fail(f"{label}: a rejection needs an error a person can read", got=d["error"])
            words = (mentions or {}).get(i) or (mentions or {}).get("*")
            if words and not any(w.lower() in d["error"].lower() for w in words):
                raise Fail(f"{label}: the error should say what was wrong", expected=f"a message mentioning one of "
                           f"{words}", got=d["error"])
    return judge


def accept_case(name, points, specs, *, mentions=None, schemas=None, allowed=None, fail_with=None, hint=None,
                visible=False):
    specs = specs if isinstance(specs, list) else [specs]
    return Case(name, points, probe_accepts(specs, schemas, allowed, fail_with),
                judge_accepts_tool(specs, mentions, schemas, allowed, fail_with, hint), visible=visible,
                fixture=specs[0]["fixture"], hint=hint)


def strict_case():
    specs = [OK, OK]

    def probe(ns):
        out = []
        for schemas in STRICT:
            out += probe_accepts([OK], schemas=schemas, allowed=["get_weather"])(ns)
        return out

    def judge(obs):
        for schemas, got in zip(STRICT, obs):
            judge_accepts_tool([OK], schemas=schemas, allowed=["get_weather"],
                               hint="Validate with jsonschema.validate(args, schemas[tool]): the schema may use "
                                    "any JSON Schema keyword (pattern, required, ...).")([got])
    return Case("schema_checked_with_jsonschema", 1, probe, judge, fixture=specs[0]["fixture"])


ACCEPT_TESTS = (
    accept_case("complete_call_runs_once", 1, OK, visible=True),
    accept_case("length_cut_stops_at_finish_reason", 1, CUT, mentions={"*": ["length"]}, visible=True,
                hint="Check result.finish_reason first: only 'stop' may be parsed."),
    accept_case("cancelled_half_object_never_parsed", 1, CANCEL_HALF, mentions={"*": ["cancelled"]},
                hint="A cancelled result stops at the finish_reason stage, before parsing."),
    accept_case("truncated_call_never_repaired_or_run", 2, REPAIRABLE,
                mentions={"*": ["length", "cancelled", "error"]},
                hint="Never close brackets of a cut-off call and run it: ' 10' may be the start of ' 1000'."),
    accept_case("complete_json_without_eos_not_run", 1, COMPLETE_NO_EOS, mentions={"*": ["length"]},
                hint="JSON that parses is still unfinished output when finish_reason is 'length'."),
    accept_case("timeout_and_filter_not_run", 1, [TIMEOUT, FILTERED],
                mentions={0: ["timeout"], 1: ["content_filter", "content filter"]}),
    accept_case("invalid_json_rejected_at_parse", 1, BAD_JSON, mentions={"*": ["json"]},
                hint="json.loads the text; a JSONDecodeError is a 'parse' rejection."),
    accept_case("enum_violation_rejected_at_schema", 1, ENUM, mentions={"*": ["Atlantis", "city", "enum"]},
                hint="Validate args against schemas[tool] with jsonschema."),
    accept_case("range_violation_rejected_at_schema", 1, RANGE, mentions={"*": ["30", "days", "maximum"]}),
    accept_case("unknown_tool_rejected_at_schema", 1, FORBIDDEN, schemas=NO_DELETE,
                mentions={"*": ["delete_file", "tool"]},
                hint="A tool with no schema fails the envelope schema (tool must be one of the known tools)."),
    strict_case(),
    accept_case("forbidden_tool_rejected_at_permission", 1, FORBIDDEN, mentions={"*": ["delete_file"]},
                hint="Check the allow-list after the schema and before the executor."),
    accept_case("executor_failure_reported_not_raised", 1, OK, fail_with=TimeoutError("weather service down"),
                mentions={"*": ["weather service down", "TimeoutError"]},
                hint="Catch the executor's exception and return it as a decision with stage 'execute'."),
)


# ---------------------------------------------------------------- accept_with_retries

def probe_retries(plan, max_attempts=3):
    def probe(ns):
        fn = function(ns, "accept_with_retries")
        reasons, ex = [], RecordingExecutor()

        def attempt(i, reason):
            reasons.append(reason)
            return course_result(plan[min(i, len(plan) - 1)])
        try:
            out = fn(attempt, schemas=copy.deepcopy(TOOL_SCHEMAS), allowed_tools=list(ALLOWED_TOOLS), executor=ex,
                     max_attempts=max_attempts)
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            return {"out": raised(e), "reasons": reasons, "calls": len(ex.calls)}
        if not isinstance(out, dict) or "attempts" not in out:
            raise Fail("accept_with_retries should return a dict with 'ok', 'attempts' and 'final'")
        attempts = [{k: a.get(k) for k in ("attempt", "finish_reason", "stage", "ok", "retry_reason")}
                    for a in out["attempts"]]
        for a in attempts:
            for k in ("finish_reason", "stage"):
                if isinstance(a[k], Enum):
                    a[k] = a[k].value
        return {"out": {"ok": out.get("ok"), "attempts": attempts}, "reasons": reasons, "calls": len(ex.calls)}
    return probe


def judge_retries(plan, max_attempts=3, hint=None):
    def judge(obs):
        reasons, ex = [], RecordingExecutor()

        def attempt(i, reason):
            reasons.append(reason)
            return ref.run_spec(plan[min(i, len(plan) - 1)])
        exp = ref.accept_with_retries(attempt, schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS, executor=ex,
                                      max_attempts=max_attempts)
        got = obs["out"]
        if is_raised(got):
            raise Fail(f"accept_with_retries raised {got['__raised__']}: {got['message']}", hint=hint)
        if obs["calls"] != len(ex.calls):
            raise Fail("the executor ran the wrong number of times", expected=len(ex.calls), got=obs["calls"],
                       hint="Only an accepted attempt runs the side effect, and only once.")
        if len(got["attempts"]) != len(exp["attempts"]):
            raise Fail("wrong number of attempts", expected=len(exp["attempts"]), got=len(got["attempts"]),
                       hint=hint or "Retry length, timeout, error, parse and schema; never cancelled, "
                                    "content_filter, permission or execute.")
        if got["attempts"] != exp["attempts"]:
            raise Fail("the attempt log is wrong", expected=exp["attempts"], got=got["attempts"],
                       hint=hint or "Record each attempt's finish_reason, stage, ok and retry_reason (None when "
                                    "it was not retried).")
        if obs["reasons"] != reasons:
            raise Fail("attempt(i, reason) got the wrong reasons", expected=reasons, got=obs["reasons"],
                       hint="Pass None to the first attempt and the previous retry_reason to each retry.")
        if got["ok"] is not exp["ok"]:
            raise Fail("wrong overall ok", expected=exp["ok"], got=got["ok"])
    return judge


def retry_case(name, points, plan, max_attempts=3, hint=None, visible=False):
    return Case(name, points, probe_retries(plan, max_attempts), judge_retries(plan, max_attempts, hint),
                visible=visible, fixture=plan[0]["fixture"], hint=hint)


def probe_bad_attempts(ns):
    fn = function(ns, "accept_with_retries")
    try:
        fn(lambda i, r: course_result(OK), schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS,
           executor=RecordingExecutor(), max_attempts=0)
    except NotImplementedError:  # a stub: reported as 'not implemented yet'
        raise
    except Exception as e:
        return raised(e)
    return None


def judge_bad_attempts(obs):
    rejects({"result": obs}, "accept_with_retries(..., max_attempts=0)", "max_attempts", 0)


RETRY_TESTS = (
    retry_case("length_retried_then_accepted", 1, [CUT, OK], visible=True),
    retry_case("cancelled_never_retried", 1, [CANCEL_HALF, OK], hint="The client left: do not run it again."),
    retry_case("permission_never_retried", 1, [FORBIDDEN, OK],
               hint="A forbidden tool is a policy answer; retrying would only probe the policy."),
    retry_case("content_filter_never_retried", 1, [FILTERED, OK]),
    retry_case("schema_retried_until_the_limit", 1, [ENUM, ENUM, ENUM], max_attempts=2),
    retry_case("error_and_timeout_retried_with_reasons", 1, [REPAIRABLE[2], TIMEOUT, OK]),
    Case("rejects_bad_max_attempts", 1, probe_bad_attempts, judge_bad_attempts),
)


# the runs whose course results probes hand to the student (datasets/fixtures/lab03_runs.json)
COURSE_RUN_SPECS = [OK, CUT, CANCEL_HALF, *REPAIRABLE, COMPLETE_NO_EOS, TIMEOUT, FILTERED, BAD_JSON, ENUM, RANGE,
                    FORBIDDEN]


# ---------------------------------------------------------------- failure log and replay

FAILURE_SPECS = [
    S("eos_at_step_3", max_tokens=8),                                              # stop: not logged
    S("eos_at_step_3", max_tokens=2),                                              # length
    S("stop_string_3_tokens", {"cancel_at": 7}, **STOP3),                          # cancelled
    S("stop_string_3_tokens", {"seconds_per_call": 0.2}, max_tokens=16, deadline=0.5),  # timeout
    S("eos_at_step_3", {"raise_at": 2}, max_tokens=8),                             # error
    S("eos_at_step_3", {"nan_at": 1}, max_tokens=8),                               # error
    S("content_filter_banned_word", {"banned_words": ["swordfish"]}, max_tokens=16),  # content_filter
    S("stop_string_2_tokens", max_tokens=16, stop=["###"]),                        # stop: not logged
    S("sampled_coin_flips", seed=3, max_tokens=6),                                 # length, sampled
    S("json_tool_call_ok", {"banned_token_ids": [course.load_fixture("json_tool_call_ok").token_id("Paris")]},
      max_tokens=32),                                                              # content_filter by id
]
REPLAY_SPECS = [FAILURE_SPECS[i] for i in (3, 4, 5, 6, 8, 9)]


def probe_replay_specs(specs):
    def probe(ns):
        fn = function(ns, "replay")
        out = []
        for spec in specs:
            try:
                out.append({"result": plain_result(fn(copy.deepcopy(spec)))})
            except Fail:
                raise
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:
                out.append({"result": raised(e)})
        return out
    return probe


def judge_replay_specs(specs):
    def judge(obs):
        for spec, got in zip(specs, obs):
            exp = ref.expected_run(spec)
            r = got["result"]
            label = _label(spec) + (f" seed={spec['seed']}" if spec.get("seed") is not None else "")
            if is_raised(r):
                raise Fail(f"{label}: replay raised {r['__raised__']}: {r['message']}",
                           hint="Build the model, clock, cancel token, filter and sampler from the spec alone.")
            for f in ("finish_reason", "tokens", "text", "raw_output"):
                if r[f] != exp[f]:
                    raise Fail(f"{label}: replay gives the wrong `{f}`", expected=exp[f], got=r[f],
                               hint="Use every injection: raise_at, nan_at, cancel_at, seconds_per_call (with "
                                    "deadline), banned_words, banned_token_ids; and seed -> seeded_sampler(seed).")
    return judge


def _read_json_lines(path):
    """(records, problems) of a JSON Lines file: one record per non-blank line."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    saved, bad = [], []
    for line in lines:
        try:
            saved.append(json.loads(line))
        except json.JSONDecodeError as e:
            bad.append(f"{e.msg}: {line[:80]}")
    return saved, bad


def probe_failure_log(ns):
    log = function(ns, "log_failures")
    rep = function(ns, "replay")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "failures.jsonl")
        try:
            returned = log(copy.deepcopy(FAILURE_SPECS), path)
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            return {"raised": raised(e)}
        saved, bad = _read_json_lines(path) if os.path.exists(path) else ([], [])
    replays = []
    for rec in saved:
        try:
            replays.append(plain_result(rep(copy.deepcopy(rec))))
        except Fail:
            raise
        except NotImplementedError:  # a stub: reported as 'not implemented yet'
            raise
        except Exception as e:
            replays.append(raised(e))
    try:
        returned_plain = json.loads(json.dumps(returned))
    except (TypeError, ValueError):
        returned_plain = {"__not_json__": repr(returned)[:200]}
    return {"raised": None, "returned": returned_plain, "saved": saved, "bad_lines": bad, "replays": replays}


def _log_ok(obs):
    if obs["raised"] is not None:
        raise Fail(f"log_failures raised {obs['raised']['__raised__']}: {obs['raised']['message']}")
    if obs["bad_lines"]:
        raise Fail("the file is not JSON Lines (one JSON object per line)", got=obs["bad_lines"][0],
                   hint="Write json.dumps(record) + '\\n' for each record.")


def _abnormal():
    return [(s, ref.expected_run(s)) for s in FAILURE_SPECS if ref.expected_run(s)["finish_reason"] != "stop"]


def judge_only_abnormal(obs):
    _log_ok(obs)
    exp = [e["finish_reason"] for _, e in _abnormal()]
    got = [r.get("finish_reason") for r in obs["saved"]]
    if got != exp:
        raise Fail("the log should hold exactly the runs that did not end with 'stop', in order", expected=exp,
                   got=got, hint="Write a record for every finish_reason other than 'stop', and only for those.")


def judge_record_fields(obs):
    _log_ok(obs)
    for (spec, exp), rec in zip(_abnormal(), obs["saved"]):
        needed = ["fixture", "prompt_ids", "params", "seed", "inject", "tokens", "text", "raw_output", "finish_reason"]
        missing = [k for k in needed if k not in rec]
        if missing:
            raise Fail(f"a saved record lacks {missing}", expected=needed, got=sorted(rec),
                       hint="Save the whole spec (fixture, prompt_ids, params, seed, inject) plus the outcome.")
        fx = course.load_fixture(spec["fixture"])
        checks = {"fixture": (rec["fixture"], spec["fixture"]), "prompt_ids": (rec["prompt_ids"], list(fx.prompt_ids)),
                  "seed": (rec["seed"], spec["seed"]), "raw_output": (rec["raw_output"], exp["raw_output"]),
                  "tokens": (rec["tokens"], exp["tokens"]), "text": (rec["text"], exp["text"])}
        for key, (g, e) in checks.items():
            if g != e:
                raise Fail(f"record of {_label(spec)}: wrong `{key}`", expected=e, got=g)
        for part in ("params", "inject"):
            have = rec[part] if isinstance(rec[part], dict) else {}
            for k, v in (spec.get(part) or {}).items():
                if have.get(k) != v:
                    raise Fail(f"record of {_label(spec)}: `{part}` lost {k}={v!r}", got=rec[part],
                               hint="Copy every parameter and every injected failure into the record.")


def probe_log_twice(ns):
    """Two calls on one path: the second appends (the log is persistent state across calls)."""
    log = function(ns, "log_failures")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "failures.jsonl")
        returned = []
        for part in (FAILURE_SPECS[:4], FAILURE_SPECS[4:]):
            try:
                returned.append(json.loads(json.dumps(log(copy.deepcopy(part), path))))
            except NotImplementedError:  # a stub: reported as 'not implemented yet'
                raise
            except Exception as e:  # not JSON-ready records are a failure too
                return {"raised": raised(e)}
        saved, bad = _read_json_lines(path)
    return {"raised": None, "returned": returned, "saved": saved, "bad_lines": bad}


def judge_file_matches_returned(obs):
    _log_ok(obs)
    first, second = obs["returned"]
    if not first or not second:
        raise Fail("log_failures returned no records for runs that did not end with 'stop'",
                   got=[len(first), len(second)], hint="Return the list of the records you wrote, in order.")
    if obs["saved"] == second:
        raise Fail("a second call on the same path replaced the file instead of appending to it",
                   expected=f"{len(first) + len(second)} lines", got=f"{len(obs['saved'])} lines",
                   hint="Open the file in append mode ('a'): earlier failures must stay in the log.")
    if obs["saved"] != first + second:
        raise Fail("log_failures should return the records it wrote, equal to the file's lines (two calls: "
                   "the file holds the first call's records, then the second's)",
                   expected=describe(first + second), got=describe(obs["saved"]))


def judge_replays(obs):
    _log_ok(obs)
    if not obs["saved"]:
        raise Fail("no failure was saved, so nothing could be replayed")
    for rec, again in zip(obs["saved"], obs["replays"]):
        if is_raised(again):
            raise Fail(f"replay of a saved {rec.get('finish_reason')} record raised {again['__raised__']}: "
                       f"{again['message']}", hint="replay(record) must work on a record read back from JSON.")
        for k in ("tokens", "text", "finish_reason"):
            if again[k] != rec.get(k):
                raise Fail(f"replaying a saved {rec.get('finish_reason')} record gives a different `{k}`",
                           expected=rec.get(k), got=again[k],
                           hint="Everything that shaped the run (seed, injections, deadline) must be in the record.")


FAILURE_TESTS = (
    Case("replay_reproduces_a_cancelled_run", 1, probe_replay_specs([FAILURE_SPECS[2]]),
         judge_replay_specs([FAILURE_SPECS[2]]), visible=True, fixture="stop_string_3_tokens"),
    Case("replay_handles_every_injection", 2, probe_replay_specs(REPLAY_SPECS), judge_replay_specs(REPLAY_SPECS)),
    Case("only_abnormal_endings_are_logged", 1, probe_failure_log, judge_only_abnormal),
    Case("records_hold_what_replay_needs", 1, probe_failure_log, judge_record_fields),
    Case("saved_file_equals_returned_records", 1, probe_log_twice, judge_file_matches_returned),
    Case("replaying_each_saved_failure_gives_the_same_result", 2, probe_failure_log, judge_replays),
)


TESTS = [
    Test(LAB, "params_are_validated", "validate_params checks every stopping parameter up front", PARAM_TESTS),
    Test(LAB, "first_stop_finds_earliest_match", "first_stop finds the stop string that completes first",
         FIRST_STOP_TESTS),
    Test(LAB, "holdback_every_prefix", "holdback_length holds back exactly what could still become a stop string",
         HOLDBACK_TESTS),
    Test(LAB, "generate_stops_and_lengths", "generate: EOS, stop strings, stop token ids and max_tokens",
         GENERATE_STOP_TESTS),
    Test(LAB, "generate_abnormal_endings", "generate: cancellation, deadlines, errors and the content filter",
         GENERATE_ABNORMAL_TESTS),
    Test(LAB, "stream_holds_back_stop_prefixes", "stream_generate never leaks a stop string and flushes held text",
         STREAM_TESTS),
    Test(LAB, "acceptance_runs_in_order", "accept_tool_call: finish reason, parse, schema, permission, execute",
         ACCEPT_TESTS),
    Test(LAB, "retries_record_their_reasons", "accept_with_retries retries only what may succeed",
         RETRY_TESTS),
    Test(LAB, "failures_are_logged_and_replayed", "log_failures saves every abnormal ending; replay reproduces it",
         FAILURE_TESTS),
]
