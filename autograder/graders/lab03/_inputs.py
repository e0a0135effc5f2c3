"""lab03's inputs, shared by the probes (in the student's process) and the tests (which judge
the same calls). No reference here, and no student code.

Every run is described by a *run spec* (course.runs): a fixture, parameters, a seed and
injected failures. `build` makes the run from course.runs (its FakeClock moved on to
CLOCK_START, so a clock never starts at 0); course.generation and course.acceptance hold
Lab 03's answers and never enter the student's process. Where a probe needs the course
loop's result as an input (accept_tool_call's result, accept_with_retries' attempts), it
reads it from datasets/fixtures/lab03_runs.json (`course_result`), written from the course
loop by datasets/generators/fixtures_lab03_runs.py.

The inputs of every case are named by keys into the tables below.
"""
from __future__ import annotations

import copy
import functools
import json
import threading
from enum import Enum

import torch

import course
from course.fixtures import FIXTURES_DIR
from course.runs import (INJECT_DEFAULTS, TOOL_SCHEMAS, GenerationResult, InjectedModel, greedy_sampler,
                         seeded_sampler)

from autograder.core import Fail

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


# ================================================================= the tables

MT = {"max_tokens": 8}
INF = float("inf")
BOUNDARY = [{"max_tokens": 1, "stop": [f"s{i}" for i in range(16)], "deadline": 0.001, "stop_token_ids": [0],
             "include_stop_str_in_output": True}, {"max_tokens": 1, "stop": []}, {"max_tokens": 5, "deadline": 3},
            {"max_tokens": 5, "deadline": INF}]   # inf is a number > 0, not NaN: no deadline at all

# validate_params: case -> the keyword arguments of each call (valid ones, or (param, kwargs) to reject)
VALID_PARAMS = {
    "accepts_and_normalises_valid_params": [{"max_tokens": 8, "stop": ["###"]}, {"max_tokens": 8}],
    "accepts_boundary_values": BOUNDARY,
}
BAD_PARAMS = {
    "rejects_max_tokens_zero": ("max_tokens", [{"max_tokens": 0}]),
    "rejects_non_integer_max_tokens": ("max_tokens", [{"max_tokens": 2.5}, {"max_tokens": True}, {"max_tokens": "8"},
                                                      {"max_tokens": -3}]),
    "rejects_a_bare_string_as_stop": ("stop", [{**MT, "stop": "###"}]),
    "rejects_empty_stop_strings": ("stop", [{**MT, "stop": [""]}, {**MT, "stop": ["ok", ""]}]),
    "rejects_more_than_16_stop_strings": ("stop", [{**MT, "stop": [f"s{i}" for i in range(17)]}]),
    "rejects_non_string_stop_items": ("stop", [{**MT, "stop": [3]}, {**MT, "stop": ["a", None]}]),
    "rejects_bad_deadline": ("deadline", [{**MT, "deadline": 0}, {**MT, "deadline": -1.5},
                                          {**MT, "deadline": float("nan")}, {**MT, "deadline": -INF},
                                          {**MT, "deadline": True}, {**MT, "deadline": "1"}]),
    "rejects_bad_stop_token_ids": ("stop_token_ids", [{**MT, "stop_token_ids": [-1]}, {**MT, "stop_token_ids": 3},
                                                      {**MT, "stop_token_ids": [1.5]}]),
    "rejects_non_bool_include_stop_str": ("include_stop_str_in_output",
                                          [{**MT, "include_stop_str_in_output": 1},
                                           {**MT, "include_stop_str_in_output": "yes"}]),
}


def prefixes(text, stop):
    return [(text[:i], stop) for i in range(len(text) + 1)]


R3 = " Sure, here it is.\nUser:"
RDIV = " Ok.\nUse the map."
ROVL = " Answer: 42\n\n\nQ:"

# first_stop / holdback_length: case -> the argument tuples of each call
FN_CALLS = {
    "first_stop/finds_a_stop_string_split_across_tokens": [(R3, ["\nUser:"])],
    "first_stop/returns_none_without_a_match": [(RDIV, ["\nUser:"]), ("abc", []), ("", ["#"])],
    "first_stop/earliest_end_wins": [("the end. ###", ["###", "end"]), ("xx ## yy", ["yy", "##"]),
                                     ("a.b!", ["!", "."])],
    "first_stop/equal_ends_prefer_the_longer_string": [("abc", ["bc", "abc"]), ("xabc", ["c", "abc", "bc"])],
    "first_stop/ends_first_not_starts_first": [("abcd", ["abcd", "bc"]), ("abcd", ["bc", "abcd"]),
                                               ("the end. ###", ["end. ###", "."])],
    "first_stop/first_occurrence_and_overlaps": [("a## b##", ["##"]), (ROVL, ["\n\nQ:"]), ("###", ["###"]),
                                                 ("aaab", ["aab"])],
    "holdback_length/every_prefix_of_a_three_token_stop": prefixes(R3, ["\nUser:"]),
    "holdback_length/every_prefix_of_a_diverging_match": prefixes(RDIV, ["\nUser:"]),
    "holdback_length/every_prefix_with_overlapping_newlines": prefixes(ROVL, ["\n\nQ:"]),
    "holdback_length/several_stop_strings_take_the_longest": prefixes(" x#\nUs##", ["###", "\nUser:"])
    + prefixes("xaaab", ["ab", "aab"]),
    "holdback_length/nothing_held_without_a_possible_match": prefixes("abc", []) + [
        ("###", ["###"]), ("x", ["x"]), ("abc", ["bd"]), ("abc", ["abc"])],
}

# generate: case -> run specs
RUNS = {
    "eos_is_stop": [S("eos_at_step_3", max_tokens=8)],
    "max_tokens_gives_length": [S("eos_at_step_3", max_tokens=2)],
    "stop_string_split_across_two_tokens": [S("stop_string_2_tokens", max_tokens=16, stop=["###"])],
    "eos_on_the_last_allowed_token_is_stop": [S("eos_at_step_3", max_tokens=4)],
    "length_keeps_exactly_max_tokens": [S("stop_string_3_tokens", max_tokens=k) for k in range(1, 9)]
    + [S("eos_at_step_3", max_tokens=1)],
    "stop_string_split_across_three_tokens": [S("stop_string_3_tokens", **STOP3)],
    "partial_match_that_diverges_does_not_stop": [S("stop_string_diverges", **STOP3)],
    "overlapping_stop_prefix": [S("stop_string_overlap", max_tokens=16, stop=["\n\nQ:"])],
    "stop_string_inside_one_token": [S("stop_string_inside_token", max_tokens=16, stop=["\n\n"])],
    "include_stop_str_in_output": [S("stop_string_3_tokens", include_stop_str_in_output=True, **STOP3),
                                   S("stop_string_inside_token", max_tokens=16, stop=["\n\n"],
                                     include_stop_str_in_output=True)],
    "stop_token_id_sets_stop_reason": [S("stop_string_2_tokens", max_tokens=16, stop_token_ids=[DOT]),
                                       S("stop_string_2_tokens", max_tokens=16, stop_token_ids=[DOT],
                                         include_stop_str_in_output=True)],
    "earliest_of_several_stop_strings": [S("stop_string_3_tokens", max_tokens=16, stop=["\nUser:", "."])],
    "stop_string_on_the_last_allowed_token_is_stop": [S("stop_string_3_tokens", max_tokens=9, stop=["\nUser:"])],
    # a prompt of several tokens: the fixture's prompt and the run's first tokens, so the script goes on from there
    "a_longer_prompt_counts_in_usage": [{**S("stop_string_3_tokens", **STOP3), "prompt_ids": [1, 2, 3]},
                                        {**S("eos_at_step_3", max_tokens=8), "prompt_ids": [1, 2, 3, 4]}],
    # abnormal endings
    "cancelled_before_the_first_call": [S("stop_string_3_tokens", {"cancel_at": 0}, **STOP3)],
    "model_error_is_recorded": [S("eos_at_step_3", {"raise_at": 2}, max_tokens=8)],
    "deadline_hit_mid_way": [S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=0.6, **STOP3)],
    "cancel_at_every_step": [S("stop_string_3_tokens", {"cancel_at": k}, **STOP3) for k in range(11)],
    "cancel_during_the_last_call_is_too_late": [S("eos_at_step_3", {"cancel_at": 3}, max_tokens=3),
                                                S("eos_at_step_3", {"cancel_at": 4}, max_tokens=8)],
    "deadline_reached_exactly": [S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=0.75, **STOP3)],
    "deadline_not_reached": [S("stop_string_3_tokens", {"seconds_per_call": 0.25}, deadline=100.0, **STOP3)],
    "cancel_wins_over_timeout": [S("stop_string_3_tokens", {"seconds_per_call": 0.25, "cancel_at": 3},
                                   deadline=0.75, **STOP3)],
    "error_on_the_first_call": [S("eos_at_step_3", {"raise_at": 0}, max_tokens=8)],
    "nan_logits_are_an_error": [S("eos_at_step_3", {"nan_at": 1}, max_tokens=8),
                                S("stop_string_3_tokens", {"nan_at": 0}, **STOP3)],
    "content_filter_on_text": [S("content_filter_banned_word", {"banned_words": ["swordfish"]}, max_tokens=16)],
    "content_filter_on_token": [S("content_filter_banned_word", {"banned_token_ids": [IS]}, max_tokens=16),
                                S("eos_at_step_3", {"banned_token_ids": [0]}, max_tokens=8)],
}
# generate called with the stopping parameters only: sampler, cancel, clock and content_filter left out
DEFAULT_RUNS = {
    "defaults_need_no_sampler_cancel_or_clock": [S("eos_at_step_3", max_tokens=8), S("stop_string_3_tokens", **STOP3),
                                                 S("sampled_coin_flips", max_tokens=6)],
}
RUN_LABELS = {"cancel_at_every_step": [f"cancel after {k} tokens" for k in range(11)],
              "a_longer_prompt_counts_in_usage": [
                  "stop_string_3_tokens (max_tokens=16, stop=['\\nUser:']) on the 3-token prompt '<prompt> Sure,'",
                  "eos_at_step_3 (max_tokens=8) on the 4-token prompt '<prompt> the cat sat'"]}
BAD_GENERATE_PARAMS = ({"max_tokens": 0}, {"max_tokens": 4, "stop": "###"}, {"max_tokens": 4, "stop": [""]},
                       {"max_tokens": 4, "deadline": 0}, {"max_tokens": 4, "stop": ["x"] * 17})


def _fixture_specs():
    out = []
    for name in ("eos_at_step_3", "stop_string_2_tokens", "stop_string_3_tokens", "stop_string_diverges",
                 "stop_string_overlap", "stop_string_inside_token", "json_tool_call_ok", "json_cut_by_max_tokens",
                 "tool_call_transfer", "transfer_cut_by_max_tokens", "content_filter_banned_word"):
        p = dict(course.load_fixture(name).params)
        words = p.pop("banned_words", None)
        out.append(S(name, {"banned_words": words} if words else None, **p))
    return out


# stream_generate: case -> run specs
STREAMS = {
    "two_token_stop_never_leaks": [S("stop_string_2_tokens", max_tokens=16, stop=["###"])],
    "three_token_stop_never_leaks": [S("stop_string_3_tokens", **STOP3)],
    "diverging_match_is_released": [S("stop_string_diverges", **STOP3)],
    "overlapping_prefix_held_exactly": [S("stop_string_overlap", max_tokens=16, stop=["\n\nQ:"])],
    "stop_inside_one_token": [S("stop_string_inside_token", max_tokens=16, stop=["\n\n"])],
    "eos_and_length_streams": [S("eos_at_step_3", max_tokens=8), S("eos_at_step_3", max_tokens=2),
                               S("stop_string_3_tokens", max_tokens=8, stop=["\nUser:"])],
    "include_stop_str_needs_no_holdback": [S("stop_string_3_tokens", include_stop_str_in_output=True, **STOP3)],
    "cancelled_or_failed_stream_flushes_held_text": [S("stop_string_3_tokens", {"cancel_at": 7}, **STOP3),
                                                     S("stop_string_3_tokens", {"raise_at": 8}, **STOP3)],
    "stream_equals_generate_on_every_fixture": _fixture_specs(),
}

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

# accept_tool_call: case -> [(spec, schemas, allowed_tools, fail_with)], one call each
ACCEPTS = {
    "complete_call_runs_once": [(OK, None, None, None)],
    "length_cut_stops_at_finish_reason": [(CUT, None, None, None)],
    "cancelled_half_object_never_parsed": [(CANCEL_HALF, None, None, None)],
    "truncated_call_never_repaired_or_run": [(s, None, None, None) for s in REPAIRABLE],
    "complete_json_without_eos_not_run": [(COMPLETE_NO_EOS, None, None, None)],
    "timeout_and_filter_not_run": [(TIMEOUT, None, None, None), (FILTERED, None, None, None)],
    "invalid_json_rejected_at_parse": [(BAD_JSON, None, None, None)],
    "enum_violation_rejected_at_schema": [(ENUM, None, None, None)],
    "range_violation_rejected_at_schema": [(RANGE, None, None, None)],
    "unknown_tool_rejected_at_schema": [(FORBIDDEN, NO_DELETE, None, None)],
    "schema_checked_with_jsonschema": [(OK, schemas, ["get_weather"], None) for schemas in STRICT],
    "forbidden_tool_rejected_at_permission": [(FORBIDDEN, None, None, None)],
    "executor_failure_reported_not_raised": [(OK, None, None, TimeoutError("weather service down"))],
    # one rejection per stage: finish_reason, parse, schema, permission, execute
    "every_rejection_includes_the_raw_output": [(CUT, None, None, None), (BAD_JSON, None, None, None),
                                                (ENUM, None, None, None), (FORBIDDEN, None, None, None),
                                                (OK, None, None, TimeoutError("weather service down"))],
}



def written_result(text: str) -> dict:
    """A finished ("stop") result whose text is `text`, written by hand (GenerationResult.to_dict form)."""
    return {"tokens": [0], "text": text, "finish_reason": "stop", "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 1}, "raw_output": text + "<eos>", "error": None}


# accept_tool_call on hand-written finished outputs: case -> the texts, each rejected at "schema"
ACCEPT_TEXTS = {
    "envelope_has_exactly_tool_and_object_args": [
        '{"tool": "get_weather", "args": {"city": "Paris"}, "confirm": true}',   # a key besides tool and args
        '{"tool": "get_weather", "args": "Paris"}',                               # args not an object
        '{"tool": "get_weather"}',                                                # no args
        '["get_weather", {"city": "Paris"}]',                                     # not an object at all
    ],
}

# accept_with_retries: case -> (the run spec of each attempt, max_attempts[, the executor's exception])
RETRIES = {
    "length_retried_then_accepted": ([CUT, OK], 3),
    "cancelled_never_retried": ([CANCEL_HALF, OK], 3),
    "permission_never_retried": ([FORBIDDEN, OK], 3),
    "content_filter_never_retried": ([FILTERED, OK], 3),
    "schema_retried_until_the_limit": ([ENUM, ENUM, ENUM], 2),
    "error_and_timeout_retried_with_reasons": ([REPAIRABLE[2], TIMEOUT, OK], 3),
    "execute_failure_never_retried": ([OK, OK], 3, TimeoutError("weather service down")),
}

# the runs whose course results probes hand to the student (datasets/fixtures/lab03_runs.json)
COURSE_RUN_SPECS = [OK, CUT, CANCEL_HALF, *REPAIRABLE, COMPLETE_NO_EOS, TIMEOUT, FILTERED, BAD_JSON, ENUM, RANGE,
                    FORBIDDEN]

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
REPLAYS = {"replay_reproduces_a_cancelled_run": [FAILURE_SPECS[2]], "replay_handles_every_injection": REPLAY_SPECS}
