"""quality_score and regressed: the hidden cases of the cells quality_score_counts_exact_and_schema and
regressed_decides_with_tolerance. Every input is a fixed, hand-checkable completion or score
(probes.QUALITY, probes.REGRESS): nothing here runs the model or reads a clock."""
from __future__ import annotations

import json

import pytest

from autograder.checks import reference_rejects, rejects, result_of
from autograder.core import Fail
from autograder.reference import lab04 as ref

from .judging import case, close
from ._quality_inputs import QUALITY, QUALITY_BAD, REGRESS, REGRESS_BAD, _quality_set

SCORE_CELL = pytest.mark.cell("quality_score_counts_exact_and_schema",
                              description="quality_score: exact-match and schema-pass rates on a fixed quality set")
REGRESS_CELL = pytest.mark.cell("regressed_decides_with_tolerance",
                                description="regressed: a drop of more than the tolerance in a rate is a regression")

PARSE_HINT = ("Parse each completion with json.loads: a completion is exact when the parsed value equals the "
              "expected call (so key order and spaces do not matter), and passes when the parsed value validates "
              "against the set's schema, right or wrong.")
SCHEMA_HINT = ("schema_pass counts every completion that is a well-formed call, exact or not: validate the parsed "
               "value against quality_set['schema'] (jsonschema), not only the exact ones.")
NOT_ONE_CALL_HINT = ("Text that json.loads rejects (cut off, or followed by more text) counts as neither; so does "
                     "JSON that is not a call object (a string, a list, null): the schema says so, no special "
                     "case needed.")
DROP_HINT = ("A rate regressed when baseline - candidate > tolerance, measured in absolute rate (not relative to "
             "the baseline): a drop of exactly the tolerance is allowed, a rise never regresses.")


def _score(rec, call, expected):
    got = result_of(rec, call, expected=expected)
    if not isinstance(got, dict) or any(k not in got for k in ref.SCORE_KEYS):
        raise Fail(f"{call} should return a dict with keys {list(ref.SCORE_KEYS)}", expected=expected, got=got)
    return got


# ---------------------------------------------------------------- quality_score

@SCORE_CELL
@pytest.mark.parametrize("key, hint", [
    case("hand_checked_completions", "hand_checked_completions", SCHEMA_HINT,
         probe=("quality", "hand_checked_completions"), visible=True, points=2),
    case("key_order_and_spaces_do_not_matter", "key_order_and_spaces_do_not_matter", PARSE_HINT,
         probe=("quality", "key_order_and_spaces_do_not_matter")),
    case("tiny_model_readme_completions", "tiny_model_readme_completions", SCHEMA_HINT,
         probe=("quality", "tiny_model_readme_completions")),
    case("json_that_is_not_one_call", "json_that_is_not_one_call", NOT_ONE_CALL_HINT,
         probe=("quality", "json_that_is_not_one_call")),
])
def test_quality_score(observation, key, hint):
    """n, the exact and schema-pass rates, and the exact prompts in the set's order; inputs unchanged."""
    for (name, completions), rec in zip(QUALITY[key], observation):
        call = f"quality_score(<{len(completions)} completions: {key}>, <{name} quality set>)"
        expected = ref.quality_score(completions, _quality_set(name))
        got = _score(rec, call, expected)
        for k in ("n", "exact", "schema_pass"):
            if type(got[k]) is bool or not (got[k] == expected[k] if k == "n" else close(got[k], expected[k])):
                raise Fail(f"`{k}` of {call} is wrong", expected=expected[k], got=got[k], hint=hint)
        if got["exact_prompts"] != expected["exact_prompts"]:
            raise Fail(f"`exact_prompts` of {call} is wrong", expected=expected["exact_prompts"],
                       got=got["exact_prompts"],
                       hint="List the prompts whose completion is exact, in the order of quality_set['items'].")
        if not rec.get("unchanged", True):
            raise Fail(f"{call} changed the completions or the quality set it was given",
                       hint="Read the inputs; never modify them (they are the fixed set every candidate is scored on).")


@SCORE_CELL
@pytest.mark.parametrize("key, hint", [
    case(key, key, hint, probe=("quality_rejects", key))
    for key, hint in (
        ("rejects_missing_prompt", "A prompt of the set without a completion would quietly raise the rates of "
                                   "a run that skipped it: raise ValueError naming `completions` and the prompt."),
        ("rejects_unknown_prompt", "A completion for a prompt that is not in the set means the run used another "
                                   "set: raise ValueError naming `completions` and the prompt."),
        ("rejects_bad_completions", "`completions` must be a dict of str: raise ValueError naming it otherwise."),
        ("rejects_empty_quality_set", "A set without items has no rates: raise ValueError naming `quality_set`."),
    )
])
def test_quality_score_rejects(observation, key, hint):
    """Missing or unknown prompts, a completion that is not a str, completions that are not a dict, and an
    empty quality set raise ValueError naming the parameter."""
    for (param, shown, name, completions), rec in zip(QUALITY_BAD[key], observation):
        call = f"quality_score(<completions: {key}>, <{name} quality set>)"
        reference_rejects(ref.quality_score, (completions, _quality_set(name)), {}, call)
        rejects(rec, call, param, shown, hint, show_value=shown is not None)


# ---------------------------------------------------------------- regressed

def _listed(prompt: str, reason: str) -> bool:
    """A prompt is listed when the reason shows it as written, as its repr or JSON, or stripped."""
    return any(form in reason for form in (prompt, repr(prompt)[1:-1], json.dumps(prompt)[1:-1], prompt.strip()))


@REGRESS_CELL
@pytest.mark.parametrize("key, hint", [
    case("drop_beyond_tolerance_regresses", "drop_beyond_tolerance_regresses", DROP_HINT,
         probe=("regress", "drop_beyond_tolerance_regresses"), visible=True, points=2),
    case("drop_equal_to_tolerance_is_allowed", "drop_equal_to_tolerance_is_allowed", DROP_HINT,
         probe=("regress", "drop_equal_to_tolerance_is_allowed")),
    case("absolute_not_relative_drop", "absolute_not_relative_drop", DROP_HINT,
         probe=("regress", "absolute_not_relative_drop")),
    case("schema_pass_drop_regresses", "schema_pass_drop_regresses", "Check every rate, schema_pass as well as "
         "exact: either one falling by more than the tolerance is a regression.",
         probe=("regress", "schema_pass_drop_regresses")),
    case("lost_prompts_listed_within_tolerance", "lost_prompts_listed_within_tolerance", "Equal rates can hide a "
         "swap: list every prompt that is in the baseline's exact_prompts and not in the candidate's, even when "
         "the decision is no regression.", probe=("regress", "lost_prompts_listed_within_tolerance")),
    case("improvement_never_regresses", "improvement_never_regresses", DROP_HINT,
         probe=("regress", "improvement_never_regresses")),
])
def test_regressed(observation, key, hint):
    """(regressed, reason): the decision by absolute drop per rate, the reason naming each rate that dropped too
    far and listing every prompt the candidate lost."""
    for (baseline, candidate, tolerance), rec in zip(REGRESS[key], observation):
        _judge_regressed(rec, key, hint, baseline, candidate, tolerance)


def _judge_regressed(rec, key, hint, baseline, candidate, tolerance):
    call = f"regressed(baseline, candidate, tolerance={tolerance!r}) on {key}"
    decision, _ = expected = ref.regressed(baseline, candidate, tolerance=tolerance)
    got = result_of(rec, call, expected=list(expected))
    if rec.get("kind") not in ("tuple", "list") or len(got) != 2 or type(got[0]) is not bool \
            or not isinstance(got[1], str):
        raise Fail(f"{call} should return a pair (bool, str)", expected=list(expected), got=got,
                   hint="Return a tuple: (True or False, a sentence saying why).")
    if got[0] != decision:
        raise Fail(f"{call} decided wrongly", expected=decision, got=got[0], hint=hint)
    reason = got[1]
    for metric in ref.METRICS:
        if baseline[metric] - candidate[metric] > tolerance and metric not in reason:
            raise Fail(f"the reason of {call} should name the rate that dropped, `{metric}`", expected=metric,
                       got=reason, hint="Name each rate that fell by more than the tolerance by its key "
                                        "(\"exact\", \"schema_pass\").")
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    unlisted = [p for p in lost if not _listed(p, reason)]
    if unlisted:
        raise Fail(f"the reason of {call} should list every prompt that is no longer exact", expected=lost,
                   got=reason, hint="Equal rates can hide a swap: list every prompt that is in the baseline's "
                                    "exact_prompts and not in the candidate's, even when the decision is no "
                                    "regression.")
    if not rec.get("unchanged", True):
        raise Fail(f"{call} changed a score it was given", hint="Read the scores; never modify them.")


@REGRESS_CELL
@pytest.mark.parametrize("key, hint", [
    case("rejects_bad_tolerance", "rejects_bad_tolerance", "`tolerance` is an absolute drop in a rate: raise "
         "ValueError naming it unless it is a number in [0, 1] (not NaN, not a bool).",
         probe=("regress_rejects", "rejects_bad_tolerance")),
    case("rejects_scores_of_different_sets", "rejects_scores_of_different_sets", "Scores of sets of different "
         "sizes cannot be compared: raise ValueError naming `candidate` and showing its n.",
         probe=("regress_rejects", "rejects_scores_of_different_sets")),
    case("rejects_a_score_without_its_keys", "rejects_a_score_without_its_keys", "A score is what quality_score "
         "returns, a dict with n, exact, schema_pass and exact_prompts: check both scores first and raise "
         "ValueError naming `baseline` or `candidate` when one is not such a dict.",
         probe=("regress_rejects", "rejects_a_score_without_its_keys")),
])
def test_regressed_rejects(observation, key, hint):
    """A tolerance outside [0, 1], NaN or a bool, a score that is not a dict with quality_score's keys, and scores
    of different sets, raise ValueError naming the parameter."""
    for (param, shown, baseline, candidate, tolerance), rec in zip(REGRESS_BAD[key], observation):
        call = f"regressed(baseline, candidate, tolerance={tolerance!r})"
        given = shown
        if shown is None:           # a score that is not one: the message need only name the parameter
            call = f"regressed(...) with a `{param}` that is not a score"
            given = baseline if param == "baseline" else candidate
        reference_rejects(ref.regressed, (baseline, candidate), {"tolerance": tolerance}, call)
        rejects(rec, call, param, given, hint, show_value=shown is not None)
