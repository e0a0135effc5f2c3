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

    _inputs.py    run specs, `build`, the course results and the input tables by case
    probes.py     the probes (they run in the student's process)
    judging.py    the run comparison the generate tests share
    test_*.py     one file per exercise, judged against autograder/reference/lab03.py

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
first_stop
  | the whole text is searched (a match across tokens) | finds_a_stop_string_split_across_tokens           |
  | None without a match and for stop == []            | returns_none_without_a_match                      |
  | smallest end wins, whatever the place in `stop`    | earliest_end_wins                                 |
  | the match that ENDS first wins, not the one that   | ends_first_not_starts_first                       |
  |   starts first                                     |                                                   |
  | equal ends -> the longer string (smaller start)    | equal_ends_prefer_the_longer_string               |
  | first occurrence; a match inside repeated chars    | first_occurrence_and_overlaps                     |
  | a tuple of two ints and a str                      | every first_stop case (judge_calls checks types)  |
holdback_length
  | longest suffix that is a proper prefix of a stop   | every_prefix_of_a_three_token_stop,               |
  |                                                    | every_prefix_with_overlapping_newlines            |
  | nothing held once the text cannot match any more   | every_prefix_of_a_diverging_match                 |
  | the longest over several stop strings              | several_stop_strings_take_the_longest             |
  | a complete stop string, or stop == [] -> 0         | nothing_held_without_a_possible_match             |
generate
  | order: cancel, timeout, call, append, filter, EOS,   | eos_is_stop, eos_on_the_last_allowed_token_is_..,|
  |   stop ids, stop strings, length                     | stop_string_on_the_last_allowed_.., cancel_wins.. |
  | length keeps exactly max_tokens                      | max_tokens_gives_length, length_keeps_exactly_..  |
  | stop strings across/inside tokens, earliest, include | stop_string_split_.., overlapping_..,             |
  |                                                      | stop_string_inside_one_token,                     |
  |                                                      | include_stop_str_in_output, earliest_of_several.. |
  | stop_token_ids -> stop_reason id                     | stop_token_id_sets_stop_reason                    |
  | validation before any model call                     | rejects_bad_params_before_calling_the_model       |
  | sampler / cancel / clock / content_filter None:      | defaults_need_no_sampler_cancel_or_clock          |
  |   greedy, never cancelled, no filter                 |                                                   |
  | cancel checked before every call                     | cancelled_before_.., cancel_at_every_step,        |
  |                                                      | cancel_during_the_last_call_is_too_late           |
  | deadline from generate's start (clock at 1000), >=   | deadline_hit_mid_way, deadline_reached_exactly,   |
  |                                                      | deadline_not_reached                              |
  | error: a str for finish_reason error, else None      | model_error_is_recorded, every generate run case  |
  | model error / NaN logits -> error, never raised      | model_error_is_recorded, error_on_the_first_call, |
  |                                                      | nan_logits_are_an_error                           |
  | content filter on text / on a token (EOS included)   | content_filter_on_text, content_filter_on_token   |
  | input_ids (1, T0) for any T0 >= 1; usage: T0 input   | a_longer_prompt_counts_in_usage                   |
  |   tokens and len(tokens) output tokens               |                                                   |
stream_generate
  | never sends a held stop prefix while running         | two_token_stop_never_leaks, stop_inside_..,       |
  |                                                      | three_token_stop_never_leaks                      |
  | releases text that can no longer match               | diverging_match_is_released, overlapping_prefix.. |
  | final flush = rest of generate().text                | cancelled_or_failed_stream_flushes_held_text,     |
  |                                                      | stream_equals_generate_on_every_fixture           |
  | no holdback with include_stop_str_in_output          | include_stop_str_needs_no_holdback                |
accept_tool_call
  | finish_reason first: only "stop" goes on           | length_cut_.., cancelled_half_object_never_parsed,|
  |                                                    | truncated_call_.., complete_json_without_eos_..,  |
  |                                                    | timeout_and_filter_not_run                        |
  | parse: json.loads of result.text                   | invalid_json_rejected_at_parse                    |
  | schema: the envelope (tool one of the known tools, | unknown_tool_rejected_at_schema,                  |
  |   args an object, no other keys)                   | envelope_has_exactly_tool_and_object_args         |
  |   then args against schemas[tool] via jsonschema   | enum_violation_.., range_violation_..,            |
  |                                                    | schema_checked_with_jsonschema                    |
  | permission: tool in allowed_tools                  | forbidden_tool_rejected_at_permission             |
  | execute: the executor runs once, only on           | complete_call_runs_once, every accept case        |
  |   acceptance; its exception is a decision          | executor_failure_reported_not_raised              |
  | the decision's keys; raw_output = result's         | every accept case (judge_decision)                |
  | error None when ok, else a sentence naming the     | every accept case, enum_violation_..,             |
  |   problem                                          | timeout_and_filter_not_run                        |
  | every rejection's error includes the raw output    | every_rejection_includes_the_raw_output           |
accept_with_retries
  | retried: length, timeout, error, parse, schema     | length_retried_then_accepted,                     |
  |                                                    | error_and_timeout_retried_with_reasons,           |
  |                                                    | schema_retried_until_the_limit                    |
  | never retried: cancelled, content_filter,          | cancelled_never_retried, permission_never_..,     |
  |   permission, execute                              | content_filter_never_retried,                     |
  |                                                    | execute_failure_never_retried                     |
  | reason None first, then the previous retry_reason  | every retry case (the reasons passed on)          |
  | the last allowed attempt is not retried            | schema_retried_until_the_limit                    |
  | max_attempts an int >= 1, else ValueError          | rejects_bad_max_attempts                          |
replay / log_failures
  | replay uses every injection and the seed             | replay_reproduces_.., replay_handles_every_inj..  |
  | only non-stop endings logged, in order               | only_abnormal_endings_are_logged                  |
  | a record holds the spec and the outcome              | records_hold_what_replay_needs                    |
  | appends (two calls, one file), returns what it wrote | saved_file_equals_returned_records                |
  | replay(record read back from JSON) reproduces it     | replaying_each_saved_failure_gives_the_same_..    |
"""
from .probes import (CLOCK_START, COURSE_RUN_SPECS, FAILURE_SPECS, STOP3, S, _fixture_specs, build,  # noqa: F401
                     course_result, run_key)

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
