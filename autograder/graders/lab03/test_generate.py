"""generate(model, input_ids, ...): the hidden cases of the cells generate_stops_and_lengths and
generate_abnormal_endings."""
from __future__ import annotations

import pytest

from autograder.core import Fail, describe

from .judging import case, compare_run, expected_default_run, judge_runs, label_of
from .probes import DEFAULT_RUNS, RUN_LABELS, RUNS

STOPS = pytest.mark.cell("generate_stops_and_lengths",
                         description="generate: EOS, stop strings, stop token ids and max_tokens")
ABNORMAL = pytest.mark.cell("generate_abnormal_endings",
                            description="generate: cancellation, deadlines, errors and the content filter")


def run(name, hint=None, *, visible=False, points=1):
    return case(name, name, hint, probe=("runs", name), visible=visible, fixture=RUNS[name][0]["fixture"],
                hint=hint, points=points)


@STOPS
@pytest.mark.parametrize("key, hint", [
    run("eos_is_stop", visible=True),
    run("max_tokens_gives_length", visible=True),
    run("stop_string_split_across_two_tokens", visible=True),
    run("eos_on_the_last_allowed_token_is_stop", "Check EOS before max_tokens: the model finished, so the output is "
        "complete."),
    run("length_keeps_exactly_max_tokens", "Append the token first, then compare len(tokens) with max_tokens: "
        "max_tokens=k gives k tokens.", points=2),
    run("stop_string_split_across_three_tokens", "Look for stop strings in the whole raw text, not only in the newest "
        "token."),
    run("partial_match_that_diverges_does_not_stop", "'\\nUse' is only a prefix of '\\nUser:'; stop only on a "
        "complete match."),
    run("overlapping_stop_prefix"),
    run("stop_string_inside_one_token", "Cut the text at the match; what follows it in the same token is dropped."),
    run("include_stop_str_in_output", "With include_stop_str_in_output the text ends right after the stop string."),
    run("stop_token_id_sets_stop_reason", "A stop token id ends with stop_reason = that id (an int); its text is "
        "dropped unless include_stop_str_in_output."),
    run("earliest_of_several_stop_strings"),
    run("stop_string_on_the_last_allowed_token_is_stop", "Check stop strings before max_tokens."),
    run("a_longer_prompt_counts_in_usage", "input_ids is a (1, T0) prompt of any length T0: accept every T0 >= 1, "
        "and report usage[\"input_tokens\"] = T0 = input_ids.shape[1] (len(input_ids) is the batch size, 1)."),
])
def test_stops_and_lengths(observation, key, hint):
    """The result the course loop gives on the same run: tokens, text, finish and stop reason, usage, calls."""
    judge_runs(observation, RUNS[key], hint, RUN_LABELS.get(key))


DEFAULTS_HINT = ("Everything after the stopping parameters may be left out: sampler=None means greedy_sampler, "
                 "cancel=None means never cancelled, clock=None means course.monotonic, content_filter=None "
                 "blocks nothing.")


@STOPS
@pytest.mark.probe("runs_with_defaults", "defaults_need_no_sampler_cancel_or_clock")
@pytest.mark.cell(fixture="eos_at_step_3", hint=DEFAULTS_HINT)
def test_defaults_need_no_sampler_cancel_or_clock(observation):
    """generate(model, input_ids, max_tokens=..., stop=...) alone: greedy, never cancelled, no deadline."""
    specs = DEFAULT_RUNS["defaults_need_no_sampler_cancel_or_clock"]
    if len(observation) != len(specs):
        raise Fail("the probe did not return one observation per run", got=len(observation))
    for spec, got in zip(specs, observation):
        compare_run(got, expected_default_run(spec), f"{label_of(spec)} without sampler, cancel or clock",
                    DEFAULTS_HINT)


@STOPS
@pytest.mark.probe("generate_validates")
def test_rejects_bad_params_before_calling_the_model(observation):
    """Invalid parameters raise ValueError before any model call."""
    for got in observation:
        if got["raised"] is None or not got["raised"]["is_value_error"]:
            raise Fail("generate must raise ValueError for invalid parameters (they are the caller's bug, "
                       "not a generation failure)", got=describe(got["raised"]),
                       hint="Call validate_params(...) at the top of generate, before the loop.")
        if got["calls"]:
            raise Fail("generate called the model before rejecting invalid parameters", got=got["calls"],
                       expected=0, hint="Validate first, then start the loop.")


@ABNORMAL
@pytest.mark.parametrize("key, hint", [
    run("cancelled_before_the_first_call", "Check cancel.is_set() before every model call, the first one included.",
        visible=True),
    run("model_error_is_recorded", visible=True),
    run("deadline_hit_mid_way", "Before each call, compare clock() - start with the deadline.", visible=True),
    run("cancel_at_every_step", "A cancellation seen before call k keeps the k tokens and their raw text; one that "
        "arrives after the run ended changes nothing.", points=3),
    run("cancel_during_the_last_call_is_too_late", "A run that ended with length or stop is finished; cancellation is "
        "only checked before a call."),
    run("deadline_reached_exactly", "The deadline has passed when clock() - start >= deadline (not only >)."),
    run("deadline_not_reached"),
    run("cancel_wins_over_timeout", "Check cancellation before the deadline."),
    run("error_on_the_first_call"),
    run("nan_logits_are_an_error", "NaN logits mean a broken model: end with finish_reason 'error', never emit a "
        "token from them."),
    run("content_filter_on_text", "Call content_filter(token, raw_text) after appending; if it blocks, the token "
        "stays in tokens and raw_output but not in text."),
    run("content_filter_on_token", "The filter runs before the EOS check, so it can block any token, EOS included."),
])
def test_abnormal_endings(observation, key, hint):
    """Cancelled, timeout, error and content_filter endings, with what was generated until then."""
    judge_runs(observation, RUNS[key], hint, RUN_LABELS.get(key))
