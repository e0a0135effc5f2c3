"""accept_tool_call and accept_with_retries: the hidden cases of the cells acceptance_runs_in_order and
retries_record_their_reasons."""
from __future__ import annotations

import json

import pytest

from autograder.checks import rejects
from autograder.core import Fail, is_raised
from autograder.reference import lab03 as ref
from course.runs import ALLOWED_TOOLS, TOOL_SCHEMAS, GenerationResult, RecordingExecutor

from .judging import case, label_of
from .probes import ACCEPT_TEXTS, ACCEPTS, RETRIES, written_result

ACCEPT = pytest.mark.cell("acceptance_runs_in_order",
                          description="accept_tool_call: finish reason, parse, schema, permission, execute")
RETRY = pytest.mark.cell("retries_record_their_reasons", description="accept_with_retries retries only what may succeed")
STRICT_HINT = ("Validate with jsonschema.validate(args, schemas[tool]): the schema may use any JSON Schema keyword "
               "(pattern, required, ...).")


def accept(name, mentions=None, hint=None, *, visible=False, points=1):
    return case(name, name, mentions, hint, probe=("accepts", name), visible=visible,
                fixture=ACCEPTS[name][0][0]["fixture"], hint=hint, points=points)


def judge_decision(spec, got, mentions_words, schemas, allowed, fail_with, hint, *, label=None, exp=None):
    label = label or label_of(spec)
    exp = exp or ref.expected_decision(spec, schemas=schemas, allowed_tools=allowed, fail_with=fail_with)
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
        return
    if not isinstance(d["error"], str) or len(d["error"]) < 10:
        raise Fail(f"{label}: a rejection needs an error a person can read", got=d["error"])
    if mentions_words and not any(w.lower() in d["error"].lower() for w in mentions_words):
        raise Fail(f"{label}: the error should say what was wrong", expected=f"a message mentioning one of "
                   f"{mentions_words}", got=d["error"])


@ACCEPT
@pytest.mark.parametrize("key, mentions, hint", [
    accept("complete_call_runs_once", visible=True),
    accept("length_cut_stops_at_finish_reason", {"*": ["length"]}, "Check result.finish_reason first: only 'stop' may "
           "be parsed.", visible=True),
    accept("cancelled_half_object_never_parsed", {"*": ["cancelled"]}, "A cancelled result stops at the "
           "finish_reason stage, before parsing."),
    accept("truncated_call_never_repaired_or_run", {"*": ["length", "cancelled", "error"]}, "Never close brackets of "
           "a cut-off call and run it: ' 10' may be the start of ' 1000'.", points=2),
    accept("complete_json_without_eos_not_run", {"*": ["length"]}, "JSON that parses is still unfinished output when "
           "finish_reason is 'length'."),
    accept("timeout_and_filter_not_run", {"0": ["timeout"], "1": ["content_filter", "content filter"]}),
    accept("invalid_json_rejected_at_parse", {"*": ["json"]}, "json.loads the text; a JSONDecodeError is a 'parse' "
           "rejection."),
    accept("enum_violation_rejected_at_schema", {"*": ["Atlantis", "city", "enum"]}, "Validate args against "
           "schemas[tool] with jsonschema."),
    accept("range_violation_rejected_at_schema", {"*": ["30", "days", "maximum"]}),
    accept("unknown_tool_rejected_at_schema", {"*": ["delete_file", "tool"]}, "A tool with no schema fails the "
           "envelope schema (tool must be one of the known tools)."),
    case("schema_checked_with_jsonschema", "schema_checked_with_jsonschema", None, None,
         probe=("accepts", "schema_checked_with_jsonschema"), fixture="json_tool_call_ok"),
    accept("forbidden_tool_rejected_at_permission", {"*": ["delete_file"]}, "Check the allow-list after the schema "
           "and before the executor."),
    accept("executor_failure_reported_not_raised", {"*": ["weather service down", "TimeoutError"]}, "Catch the "
           "executor's exception and return it as a decision with stage 'execute'."),
])
def test_accept_tool_call(observation, key, mentions, hint):
    """The stage and decision of the course's acceptance; the executor runs only for an accepted call."""
    if key == "schema_checked_with_jsonschema":
        mentions, hint = None, STRICT_HINT
    for i, ((spec, schemas, allowed, fail_with), got) in enumerate(zip(ACCEPTS[key], observation)):
        words = (mentions or {}).get(str(i)) or (mentions or {}).get("*")
        judge_decision(spec, got, words, schemas, allowed, fail_with, hint)


RAW_HINT = ("Every rejection's error must include the raw output it judged (result.raw_output, EOS text and "
            "all), at every stage: finish_reason, parse, schema, permission and execute.")


def shows(error: str, raw: str) -> bool:
    """Whether `error` holds `raw` as written, as repr() or as JSON writes it (quotes escaped)."""
    return any(form in error for form in (raw, repr(raw)[1:-1], json.dumps(raw)[1:-1]))


@ACCEPT
@pytest.mark.probe("accepts", "every_rejection_includes_the_raw_output")
@pytest.mark.cell(fixture="json_cut_by_max_tokens", hint=RAW_HINT)
def test_every_rejection_includes_the_raw_output(observation):
    """A rejection at each stage: its error includes result.raw_output (the text of every token, EOS included)."""
    for (spec, schemas, allowed, fail_with), got in zip(ACCEPTS["every_rejection_includes_the_raw_output"],
                                                         observation):
        judge_decision(spec, got, None, schemas, allowed, fail_with, None)
        d, raw = got["decision"], ref.run_spec(spec).raw_output
        if not shows(d["error"], raw):
            raise Fail(f"{label_of(spec)}: the rejection at stage {d['stage']!r} does not include the raw output",
                       expected=f"an error containing {raw!r}", got=d["error"], hint=RAW_HINT)


ENVELOPE_HINT = ("Validate the whole call against the envelope schema first (an object with exactly the keys "
                 "tool and args, tool one of the known tools, args an object), then args against schemas[tool]; "
                 "anything else is a 'schema' rejection, never an exception.")


@ACCEPT
@pytest.mark.probe("accepts_texts", "envelope_has_exactly_tool_and_object_args")
@pytest.mark.cell(hint=ENVELOPE_HINT)
def test_envelope_has_exactly_tool_and_object_args(observation):
    """Finished outputs whose envelope is wrong (an extra key, args not an object, no args, a list) stop at 'schema'."""
    for text, got in zip(ACCEPT_TEXTS["envelope_has_exactly_tool_and_object_args"], observation):
        ex = RecordingExecutor()
        d = ref.accept_tool_call(GenerationResult.from_dict(written_result(text)), schemas=TOOL_SCHEMAS,
                                 allowed_tools=ALLOWED_TOOLS, executor=ex)
        judge_decision(None, got, None, None, None, None, ENVELOPE_HINT, label=f"the output {text!r}",
                       exp={"decision": d, "calls": [[t, a] for t, a in ex.calls]})


def retry(name, hint=None, *, visible=False):
    return case(name, name, hint, probe=("retries", name), visible=visible, fixture=RETRIES[name][0][0]["fixture"],
                hint=hint)


@RETRY
@pytest.mark.parametrize("key, hint", [
    retry("length_retried_then_accepted", visible=True),
    retry("cancelled_never_retried", "The client left: do not run it again."),
    retry("permission_never_retried", "A forbidden tool is a policy answer; retrying would only probe the policy."),
    retry("content_filter_never_retried"),
    retry("schema_retried_until_the_limit"),
    retry("error_and_timeout_retried_with_reasons"),
    retry("execute_failure_never_retried", "The side effect already ran (and failed): running the call again "
          "could repeat it. Only length, timeout, error, parse and schema are retried."),
])
def test_retries(observation, key, hint):
    """The attempt log, the reasons passed on and the executor's runs of the course's accept_with_retries."""
    plan, max_attempts, *fail_with = RETRIES[key]
    reasons, ex = [], RecordingExecutor(fail_with=fail_with[0] if fail_with else None)

    def attempt(i, reason):
        reasons.append(reason)
        return ref.run_spec(plan[min(i, len(plan) - 1)])
    exp = ref.accept_with_retries(attempt, schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS, executor=ex,
                                  max_attempts=max_attempts)
    got = observation["out"]
    if is_raised(got):
        raise Fail(f"accept_with_retries raised {got['__raised__']}: {got['message']}", hint=hint)
    if observation["calls"] != len(ex.calls):
        raise Fail("the executor ran the wrong number of times", expected=len(ex.calls), got=observation["calls"],
                   hint="Only an accepted attempt runs the side effect, and only once.")
    if len(got["attempts"]) != len(exp["attempts"]):
        raise Fail("wrong number of attempts", expected=len(exp["attempts"]), got=len(got["attempts"]),
                   hint=hint or "Retry length, timeout, error, parse and schema; never cancelled, "
                                "content_filter, permission or execute.")
    if got["attempts"] != exp["attempts"]:
        raise Fail("the attempt log is wrong", expected=exp["attempts"], got=got["attempts"],
                   hint=hint or "Record each attempt's finish_reason, stage, ok and retry_reason (None when "
                                "it was not retried).")
    if observation["reasons"] != reasons:
        raise Fail("attempt(i, reason) got the wrong reasons", expected=reasons, got=observation["reasons"],
                   hint="Pass None to the first attempt and the previous retry_reason to each retry.")
    if got["ok"] is not exp["ok"]:
        raise Fail("wrong overall ok", expected=exp["ok"], got=got["ok"])


@RETRY
@pytest.mark.probe("bad_attempts")
def test_rejects_bad_max_attempts(observation):
    """max_attempts=0 raises ValueError naming it."""
    rejects({"result": observation}, "accept_with_retries(..., max_attempts=0)", "max_attempts", 0)
