"""first_stop(text, stop) and holdback_length(text, stop): the hidden cases of the cells
first_stop_finds_earliest_match and holdback_every_prefix."""
from __future__ import annotations

import pytest

from autograder.core import Fail, is_raised
from autograder.reference import lab03 as ref

from .judging import case
from .probes import FN_CALLS

FIRST_STOP = pytest.mark.cell("first_stop_finds_earliest_match",
                              description="first_stop finds the stop string that completes first")
HOLDBACK = pytest.mark.cell("holdback_every_prefix",
                            description="holdback_length holds back exactly what could still become a stop string")


def row(fn_name, name, hint, *, visible=False, fixture=None):
    key = f"{fn_name}/{name}"
    return case(name, key, hint, probe=("fn_calls", key), visible=visible, fixture=fixture, hint=hint)


def judge_calls(obs, key, hint):
    name = key.split("/")[0]
    for args, got in zip(FN_CALLS[key], obs):
        exp = getattr(ref, name)(*args)
        exp = list(exp) if isinstance(exp, tuple) else exp
        if is_raised(got):
            raise Fail(f"{name}{tuple(args)!r} raised {got['__raised__']}: {got['message']}", expected=exp, hint=hint)
        if got != exp or type(got) is not type(exp):
            raise Fail(f"{name}{tuple(args)!r} is wrong", expected=exp, got=got, hint=hint)


@FIRST_STOP
@pytest.mark.parametrize("key, hint", [
    row("first_stop", "finds_a_stop_string_split_across_tokens", "Search the whole text so far, not only the newest "
        "token.", visible=True, fixture="stop_string_3_tokens"),
    row("first_stop", "returns_none_without_a_match", "Return None when no stop string occurs (and for an empty "
        "stop list).", visible=True),
    row("first_stop", "earliest_end_wins", "The match that completes first (smallest end index) wins, whatever its "
        "place in `stop`."),
    row("first_stop", "ends_first_not_starts_first", "The match that ENDS first wins, even when another stop "
        "string starts earlier: in 'abcd' with ['abcd', 'bc'], 'bc' is complete at index 3, before 'abcd' (4)."),
    row("first_stop", "equal_ends_prefer_the_longer_string", "When two matches end at the same index, the longer "
        "one (smaller start) wins."),
    row("first_stop", "first_occurrence_and_overlaps", "Use the first occurrence; a match may start inside a run of "
        "repeated characters."),
])
def test_first_stop(observation, key, hint):
    """(start, end, stop_string) of the match that completes first, or None."""
    judge_calls(observation, key, hint)


@HOLDBACK
@pytest.mark.parametrize("key, hint", [
    row("holdback_length", "every_prefix_of_a_three_token_stop", "Hold back the longest suffix that is a proper "
        "prefix of a stop string.", visible=True, fixture="stop_string_3_tokens"),
    row("holdback_length", "every_prefix_of_a_diverging_match", "Once the text can no longer continue into the stop "
        "string, hold back nothing.", fixture="stop_string_diverges"),
    row("holdback_length", "every_prefix_with_overlapping_newlines", "After three newlines only the last two can "
        "start '\\n\\nQ:': try every suffix length.", fixture="stop_string_overlap"),
    row("holdback_length", "several_stop_strings_take_the_longest", "Take the maximum over all stop strings, and the "
        "longest suffix for each."),
    row("holdback_length", "nothing_held_without_a_possible_match", "A complete stop string is a match, not a prefix: "
        "only proper prefixes are held; no stops, no holdback."),
])
def test_holdback_length(observation, key, hint):
    """The length of the longest suffix that is a proper prefix of a stop string."""
    judge_calls(observation, key, hint)
