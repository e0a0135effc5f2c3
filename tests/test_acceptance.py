"""course.acceptance: the acceptance order, the recording executor, retries, failure log and replay."""
import json

import pytest

from course import FinishReason
from course.acceptance import (ALLOWED_TOOLS, TOOL_SCHEMAS, InjectedModel, RecordingExecutor, accept_tool_call,
                               accept_with_retries, build_run, log_failures, normalise_spec, read_failures,
                               replay, retry_reason, run_spec)
from course.generation import generate


def accept(spec, executor=None, **kw):
    ex = executor or RecordingExecutor()
    d = accept_tool_call(run_spec(spec), schemas=kw.get("schemas", TOOL_SCHEMAS),
                         allowed_tools=kw.get("allowed", ALLOWED_TOOLS), executor=ex)
    return d, ex


def test_a_complete_call_runs_exactly_once():
    d, ex = accept({"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}})
    assert d["ok"] and d["stage"] == "execute" and d["error"] is None
    assert ex.calls == [("get_weather", {"city": "Paris"})] and d["value"] == {"tool": "get_weather", "status": "done"}


@pytest.mark.parametrize("spec", [
    {"fixture": "json_cut_by_max_tokens", "params": {"max_tokens": 6}},
    {"fixture": "transfer_cut_by_max_tokens", "params": {"max_tokens": 20}},
    {"fixture": "json_tool_call_ok", "params": {"max_tokens": 17}},  # complete JSON, but EOS never came
    {"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}, "inject": {"cancel_at": 16}},
    {"fixture": "tool_call_transfer", "params": {"max_tokens": 32, "deadline": 1.0},
     "inject": {"seconds_per_call": 0.1}},
    {"fixture": "tool_call_transfer", "params": {"max_tokens": 32}, "inject": {"raise_at": 21}},
    {"fixture": "tool_call_transfer", "params": {"max_tokens": 32}, "inject": {"banned_words": ["alice"]}},
])
def test_no_abnormal_ending_reaches_the_executor(spec):
    d, ex = accept(spec)
    assert not d["ok"] and d["stage"] == "finish_reason" and ex.calls == []
    assert d["finish_reason"] in d["error"] and repr(d["raw_output"]) in d["error"]
    assert d["raw_output"] == run_spec(spec).raw_output


@pytest.mark.parametrize("fixture,stage,mentions", [
    ("tool_call_bad_json", "parse", "JSON"),
    ("tool_call_enum_violation", "schema", "Atlantis"),
    ("tool_call_out_of_range", "schema", "days"),
    ("tool_call_not_permitted", "permission", "delete_file"),
])
def test_each_stage_rejects_with_a_readable_error(fixture, stage, mentions):
    d, ex = accept({"fixture": fixture, "params": {"max_tokens": 32}})
    assert d["stage"] == stage and not d["ok"] and ex.calls == [] and mentions in d["error"]


def test_schema_stage_uses_full_json_schema():
    strict = {"get_weather": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[a-z]+$"}}}}
    d, ex = accept({"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}}, schemas=strict,
                   allowed=["get_weather"])
    assert d["stage"] == "schema" and "args.city" in d["error"] and "does not match" in d["error"] and ex.calls == []


def test_executor_failure_is_reported_not_raised():
    d, ex = accept({"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}},
                   executor=RecordingExecutor(fail_with=TimeoutError("weather service down")))
    assert d["stage"] == "execute" and not d["ok"] and "weather service down" in d["error"] and len(ex.calls) == 1


def test_retries_only_what_may_succeed_and_record_why():
    plan = [{"fixture": "json_cut_by_max_tokens", "params": {"max_tokens": 6}},
            {"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}}]
    reasons = []

    def attempt(i, reason):
        reasons.append(reason)
        return run_spec(plan[i])
    ex = RecordingExecutor()
    out = accept_with_retries(attempt, schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS, executor=ex)
    assert out["ok"] and reasons == [None, "length"] and len(ex.calls) == 1
    assert [a["retry_reason"] for a in out["attempts"]] == ["length", None]

    cancelled = {"fixture": "json_tool_call_ok", "params": {"max_tokens": 32}, "inject": {"cancel_at": 3}}
    out = accept_with_retries(lambda i, r: run_spec(cancelled), schemas=TOOL_SCHEMAS,
                              allowed_tools=ALLOWED_TOOLS, executor=ex)
    assert not out["ok"] and len(out["attempts"]) == 1 and out["attempts"][0]["retry_reason"] is None

    bad = {"fixture": "tool_call_enum_violation", "params": {"max_tokens": 32}}
    out = accept_with_retries(lambda i, r: run_spec(bad), schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS,
                              executor=ex, max_attempts=2)
    assert [a["retry_reason"] for a in out["attempts"]] == ["schema", None] and len(ex.calls) == 1
    with pytest.raises(ValueError, match="`max_attempts` must be an integer >= 1, got 0."):
        accept_with_retries(attempt, schemas=TOOL_SCHEMAS, allowed_tools=ALLOWED_TOOLS, executor=ex, max_attempts=0)


def test_retry_reason_table():
    base = {"ok": False, "finish_reason": "stop"}
    assert [retry_reason({**base, "stage": s}) for s in ("parse", "schema", "permission", "execute")] == \
        ["parse", "schema", None, None]
    assert [retry_reason({**base, "stage": "finish_reason", "finish_reason": f}) for f in
            ("length", "timeout", "error", "cancelled", "content_filter")] == ["length", "timeout", "error", None, None]


SPECS = [
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}},                          # stop: not logged
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 2}},                          # length
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "stop": ["\nUser:"]},
     "inject": {"cancel_at": 7}},                                                       # cancelled
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "deadline": 0.5},
     "inject": {"seconds_per_call": 0.2}},                                              # timeout
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}, "inject": {"raise_at": 2}},  # error
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}, "inject": {"nan_at": 1}},    # error
    {"fixture": "content_filter_banned_word", "params": {"max_tokens": 16},
     "inject": {"banned_words": ["swordfish"]}},                                        # content_filter
    {"fixture": "sampled_coin_flips", "params": {"max_tokens": 6}, "seed": 3},          # length, sampled
]


def test_failure_log_holds_every_abnormal_ending_and_replays_it(tmp_path):
    path = tmp_path / "failures.jsonl"
    written = log_failures(SPECS, path)
    saved = read_failures(path)
    assert saved == written and len(saved) == 7
    assert [r["finish_reason"] for r in saved] == ["length", "cancelled", "timeout", "error", "error",
                                                  "content_filter", "length"]
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for key in ("fixture", "prompt_ids", "params", "seed", "inject", "raw_output", "finish_reason"):
            assert key in rec
    seeded = saved[-1]  # sampled: its tokens depend on the seed, so the seed must be in the record
    assert seeded["seed"] == 3 and seeded["tokens"] != run_spec({**SPECS[-1], "seed": None}).tokens
    for rec in saved:
        again = replay(rec)
        assert (again.tokens, again.text, str(again.finish_reason), again.raw_output) == \
            (rec["tokens"], rec["text"], rec["finish_reason"], rec["raw_output"])


def test_spec_helpers_validate_and_fill_defaults():
    s = normalise_spec({"fixture": "eos_at_step_3"})
    assert s["prompt_ids"] == [1] and s["inject"]["cancel_at"] is None and s["seed"] is None
    with pytest.raises(ValueError, match=r"`spec\['inject'\]` has unknown keys \['cancel'\]"):
        normalise_spec({"fixture": "eos_at_step_3", "inject": {"cancel": 2}})
    with pytest.raises(ValueError, match="`cancel_at` must be None or an integer >= 0, got -1"):
        InjectedModel(None, prompt_len=1, cancel=object(), cancel_at=-1)
    model, ids, kw = build_run({"fixture": "eos_at_step_3", "params": {"max_tokens": 8}, "inject": {"cancel_at": 0}})
    assert generate(model, ids, **kw).finish_reason is FinishReason.CANCELLED and model.calls == 0
