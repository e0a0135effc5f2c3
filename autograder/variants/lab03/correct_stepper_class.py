"""A correct solution written differently: a Stepper object owns the loop state and one
step() method, which generate and stream_generate both drive; validation and acceptance
are tables of rules; stop matching scans candidate matches sorted by (end, -length)."""
import json
import math
import threading

import jsonschema
import torch

import course
from course import FakeClock, FinishReason, ScriptedModel
from course.runs import InjectedModel
from course.runs import GenerationResult, greedy_sampler, seeded_sampler

EXPECT_FAIL = {}

_RULES = [
    ("max_tokens", "an integer >= 1", lambda v: type(v) is int and v >= 1),
    ("stop", "None or a list of non-empty strings (at most 16)",
     lambda v: v is None or (type(v) is list and len(v) <= 16 and all(type(s) is str and s for s in v))),
    ("stop_token_ids", "None or a list of integers >= 0",
     lambda v: v is None or (type(v) is list and all(type(t) is int and t >= 0 for t in v))),
    ("include_stop_str_in_output", "True or False", lambda v: type(v) is bool),
    ("deadline", "None or a number of seconds > 0",
     lambda v: v is None or (type(v) in (int, float) and not math.isnan(v) and v > 0)),
]


def validate_params(*, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False, deadline=None):
    values = {"max_tokens": max_tokens, "stop": stop, "stop_token_ids": stop_token_ids,
              "include_stop_str_in_output": include_stop_str_in_output, "deadline": deadline}
    for name, rule, ok in _RULES:
        if not ok(values[name]):
            shown = values[name]
            if name == "stop" and type(shown) is list and len(shown) > 16:
                shown = f"{len(shown)} strings"
            raise ValueError(f"`{name}` must be {rule}, got {shown!r}.")
    values["stop"] = list(stop or [])
    values["stop_token_ids"] = list(stop_token_ids or [])
    return values


def first_stop(text, stop):
    candidates = []
    for s in set(stop):
        i = text.find(s)
        if i != -1:
            candidates.append((i + len(s), -len(s), s))
    if not candidates:
        return None
    end, neg_len, s = sorted(candidates)[0]
    return (end + neg_len, end, s)


def holdback_length(text, stop):
    longest = max((len(s) for s in stop), default=0)
    for n in range(min(len(text), longest - 1), 0, -1):
        tail = text[-n:]
        if any(len(s) > n and s.startswith(tail) for s in stop):
            return n
    return 0


class Stepper:
    """One generation's state; step() returns None while the run goes on, else the result."""

    def __init__(self, model, input_ids, params, sampler, cancel, clock, content_filter):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
            raise ValueError(f"`input_ids` must be a (1, T) tensor, got {input_ids!r}.")
        self.model, self.ids, self.p = model, input_ids, params
        self.sampler = sampler or greedy_sampler
        self.cancel, self.content_filter = cancel, content_filter
        self.clock = clock or course.monotonic
        self.t0 = self.clock()
        self.n_prompt = int(input_ids.shape[1])
        self.tokens, self.pieces = [], []

    @property
    def raw(self):
        return "".join(self.pieces)

    def _end(self, reason, text=None, stop_reason=None, error=None):
        raw = self.raw
        return GenerationResult(list(self.tokens), raw if text is None else text, reason, stop_reason,
                                {"input_tokens": self.n_prompt, "output_tokens": len(self.tokens)}, raw, error)

    def step(self):
        if self.cancel is not None and self.cancel.is_set():
            return self._end(FinishReason.CANCELLED)
        if self.p["deadline"] is not None and self.clock() >= self.t0 + self.p["deadline"]:
            return self._end(FinishReason.TIMEOUT)
        try:
            row = self.model(self.ids)[0]
            if bool(torch.isnan(row).any()):
                raise ArithmeticError("the model produced NaN")
            t = int(self.sampler(row))
        except Exception as e:
            return self._end(FinishReason.ERROR, error=repr(e))
        prev = self.raw
        self.tokens.append(t)
        self.pieces.append(self.model.decode([t]))
        self.ids = torch.cat([self.ids, torch.tensor([[t]], dtype=self.ids.dtype)], dim=1)
        raw, keep_stop = self.raw, self.p["include_stop_str_in_output"]
        if self.content_filter is not None and self.content_filter(t, raw):
            return self._end(FinishReason.CONTENT_FILTER, prev)
        if t == getattr(self.model, "eos_token_id", None):
            return self._end(FinishReason.STOP, prev)
        if t in self.p["stop_token_ids"]:
            return self._end(FinishReason.STOP, raw if keep_stop else prev, t)
        m = first_stop(raw, self.p["stop"])
        if m:
            return self._end(FinishReason.STOP, raw[:m[1] if keep_stop else m[0]], m[2])
        if len(self.tokens) >= self.p["max_tokens"]:
            return self._end(FinishReason.LENGTH)
        return None


def _stepper(model, input_ids, kw):
    p = validate_params(**{k: kw.pop(k) for k in list(kw) if k in
                           ("max_tokens", "stop", "stop_token_ids", "include_stop_str_in_output", "deadline")})
    return Stepper(model, input_ids, p, kw.get("sampler"), kw.get("cancel"), kw.get("clock"),
                   kw.get("content_filter"))


def generate(model, input_ids, **kw):
    s = _stepper(model, input_ids, kw)
    while True:
        done = s.step()
        if done is not None:
            return done


def stream_generate(model, input_ids, **kw):
    s = _stepper(model, input_ids, kw)
    hold = [] if s.p["include_stop_str_in_output"] else s.p["stop"]
    sent = 0
    while True:
        done = s.step()
        if done is not None:
            yield done.text[sent:]
            return
        raw = s.raw
        ready = len(raw) - holdback_length(raw, hold)
        yield raw[sent:ready]  # possibly empty
        sent = max(sent, ready)


_ENVELOPE = {"type": "object", "required": ["tool", "args"], "additionalProperties": False,
             "properties": {"args": {"type": "object"}}}


def accept_tool_call(result, *, schemas, allowed_tools, executor):
    state = {"call": None, "value": None}

    def finished():
        fr = getattr(result.finish_reason, "value", result.finish_reason)
        return None if fr == "stop" else f"output incomplete: finish_reason={fr}"

    def parsed():
        try:
            state["call"] = json.loads(result.text)
        except ValueError as e:
            return f"invalid JSON: {e}"

    def valid():
        envelope = dict(_ENVELOPE, properties=dict(_ENVELOPE["properties"], tool={"enum": sorted(schemas)}))
        # the envelope first; only a valid envelope names a tool whose args schema applies
        for pair in (lambda: (state["call"], envelope), lambda: (state["call"]["args"], schemas[state["call"]["tool"]])):
            value, schema = pair()
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=str)
            if errors:
                return "schema violation: " + errors[0].message

    def permitted():
        tool = state["call"]["tool"]
        return None if tool in allowed_tools else f"tool {tool} is not permitted"

    def executed():
        try:
            state["value"] = executor(state["call"]["tool"], state["call"]["args"])
        except Exception as e:
            return f"executor failed: {type(e).__name__}: {e}"

    for stage, check in (("finish_reason", finished), ("parse", parsed), ("schema", valid),
                         ("permission", permitted), ("execute", executed)):
        problem = check()
        if problem:
            break
    return {"ok": not problem, "stage": stage,
            "error": f"{problem} (raw output {result.raw_output!r})" if problem else None,
            "finish_reason": str(getattr(result.finish_reason, "value", result.finish_reason)),
            "raw_output": result.raw_output, "call": state["call"], "value": state["value"]}


_RETRY = {("finish_reason", "length"): "length", ("finish_reason", "timeout"): "timeout",
          ("finish_reason", "error"): "error"}


def accept_with_retries(attempt, *, schemas, allowed_tools, executor, max_attempts=3):
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts <= 0:
        raise ValueError(f"`max_attempts` must be an integer >= 1, got {max_attempts!r}.")
    log, reason, i = [], None, 0
    while True:
        d = accept_tool_call(attempt(i, reason), schemas=schemas, allowed_tools=allowed_tools, executor=executor)
        reason = None
        if not d["ok"] and i < max_attempts - 1:
            reason = _RETRY.get((d["stage"], d["finish_reason"])) or (d["stage"] if d["stage"] in ("parse", "schema")
                                                                      else None)
        log.append({"attempt": i, "finish_reason": d["finish_reason"], "stage": d["stage"], "ok": d["ok"],
                    "retry_reason": reason})
        if reason is None:
            return {"ok": d["ok"], "attempts": log, "final": d}
        i += 1


def replay(record):
    fx = course.load_fixture(record["fixture"])
    inj = {"raise_at": None, "nan_at": None, "cancel_at": None, "seconds_per_call": 0.0, "banned_words": [],
           "banned_token_ids": [], **(record.get("inject") or {})}
    clock, cancel = FakeClock(), threading.Event()
    model = InjectedModel(ScriptedModel(fx, raise_at=inj["raise_at"], nan_at=inj["nan_at"]),
                          prompt_len=len(fx.prompt_ids), cancel=cancel, cancel_at=inj["cancel_at"], clock=clock,
                          seconds_per_call=inj["seconds_per_call"])
    banned = inj["banned_words"], frozenset(inj["banned_token_ids"])
    filt = None
    if banned[0] or banned[1]:
        def filt(token, text):
            return token in banned[1] or any(w in text for w in banned[0])
    prompt = record["prompt_ids"] if record.get("prompt_ids") is not None else list(fx.prompt_ids)
    sampler = seeded_sampler(record["seed"]) if record.get("seed") is not None else None
    return generate(model, torch.tensor([prompt]), **dict(record.get("params") or {}), sampler=sampler,
                    cancel=cancel, clock=clock, content_filter=filt)


def log_failures(specs, path):
    lines = []
    for spec in specs:
        r = replay(spec)
        if r.finish_reason is FinishReason.STOP:
            continue
        rec = dict(spec)
        rec.setdefault("prompt_ids", list(course.load_fixture(spec["fixture"]).prompt_ids))
        rec.setdefault("seed", None)
        rec.setdefault("inject", {})
        rec.update(r.to_dict())
        lines.append(json.loads(json.dumps(rec)))
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)
    return lines
