"""Graders for lab07 (the serving engine).

Every engine case is a TRACE: requests arrive at given steps, some are aborted at given
steps, and the probe steps the student's Engine to the end on a FakeClock. The model the
engine gets is wrapped in a `Watch` (built in the student's process, like any input):
it logs every forward pass as rows [request, cached tokens, new tokens] and keeps each
request's cache, so a probe can read a request's blocks straight from the allocator
instead of trusting what the engine says about itself. The judge reruns the same trace
on the reference engine (course.engine) and compares plain data: tokens, text, finish
reasons, who was in which forward pass, blocks held.

Two models: a scripted batched model (course.batched.ScriptedBatchedModel: exact
scripted sequences, injected errors and NaN) and the shipped tiny model (tokens equal
to each request's solo run, logits within 1e-4).

Contract coverage (clause -> the hidden cases that fail when it is broken):

Engine (the notebook's given class) over check_admission, schedule, run_batch, advance, finish, abort_request
  | clause                                              | case(s)                                          |
  | each request's tokens as if it ran alone            | scripted_staggered_arrivals, tiny_model_..       |
  | prefill and decodes in ONE forward per step         | prefill_and_decode_share_a_forward               |
  | at most max_batch requests run                      | max_batch_is_respected                           |
  | endings: EOS, stop token, stop string, length       | eos_stop_token_stop_string_length                |
  | stop strings across tokens, never streamed          | stop_string_across_tokens_never_streamed         |
  | deadline ends running and waiting requests          | deadline_ends_running_and_waiting                |
  | a model error / NaN ends only its request           | model_error_ends_only_its_request, nan_logits_.. |
  | an ending frees blocks in its own step              | blocks_released_in_the_finishing_step            |
  | no forward for a finished request                   | no_forward_after_finishing                       |
  | abort frees blocks now, no output after             | abort_after_*_steps, abort_a_waiting_request     |
  | a late abort is ignored                             | late_abort_is_ignored                            |
  | FCFS: the oldest is never skipped, never starved    | fcfs_head_is_not_skipped, no_request_waits_..    |
  | admission within the block budget and watermark     | admission_respects_the_block_budget, watermark.. |
  | liveness: no watermark with nothing running; every  | every_admissible_request_finishes                |
  |   request that fits alone ends (a step cap)         |                                                  |
  | preemption: the newest, recomputed, same tokens     | preempted_requests_keep_their_tokens, preempts.. |
  | batching pays: 8 concurrent >= 4x sequential        | throughput_on_the_cost_model                     |
  | spans: queue, prefill, decode; tokens; endings      | stages_per_request, ttft_tpot_queue_per_request  |
  | counters per step: batch_size, kv_blocks_in_use     | counters_per_step                                |
  | QueueFull, RequestRefused, ValueError(prompt_ids)   | queue_full, refuses_what_never_fits, rejects_..  |
  | refused exactly when it cannot run alone (P+M-1)    | refuses_what_never_fits                          |
replay_in_engine(engine_cls, record)
  | each Lab 03 sample: tokens, streamed text, finish   | replays_length, replays_cancelled, replays_..    |
  |   reason, pool empty after; None for a filter       | content_filter_sample_is_not_replayable          |
"""
from __future__ import annotations

import copy
from functools import lru_cache, wraps

import torch

from course.batched import EngineConfig, RequestParams, ScriptedBatchedModel, SimulatedCost
from course.clock import FakeClock

from ..core import Case, Fail, Test, describe, function, is_raised, raised
from ..checks import one_thread, rejects, shipped_model, single_threaded
from ..reference import lab07 as ref

LAB = "lab07"

API = {
    "check_admission": "(engine, prompt_ids, params)",
    "schedule": "(engine)",
    "run_batch": "(engine, batch)",
    "advance": "(engine, req, logits, now)",
    "finish": "(engine, req, reason, now, *, new=(), text=None, stop_reason=None, error=None)",
    "abort_request": "(engine, request_id)",
    "replay_in_engine": "(engine_cls, record)",
}
# The notebook's Engine class (a locked setup cell) calls these six; the probes build that Engine.
ENGINE_PARTS = ("check_admission", "schedule", "run_batch", "advance", "finish", "abort_request")


def engine_class(ns):
    """The notebook's Engine, after making sure every function it calls is there."""
    for name in ENGINE_PARTS:
        function(ns, name)
    return function(ns, "Engine")


# ================================================================= inputs: the scripted world

VOCAB = ["<e>", "Hel", "lo", " wo", "rld", "\nUs", "er:", "!", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"]
EOS = 0
PROMPTS = {f"p{i}": [7 + i] for i in range(1, 10)}          # one-token prompts, ids 8..16
PROMPTS["big"] = [16] + [7] * 9                               # 10 tokens, its own script
PROMPTS["q1"] = [14, 15, 16]                                  # three-token prompts, their own scripts
PROMPTS["q2"] = [15, 16, 14]
SCRIPTS = {"p1": [1, 2, 3, 4, 0],              # "Hello world", EOS
           "p2": [1, 2, 5, 6, 7, 7],           # "Hello\nUser:!!": the stop string spans two tokens
           "p3": [2] * 40,                     # never ends by itself
           "p4": [3, 4, 7, 0],
           "p5": [7, 7, 1, 0],
           "p6": [4, 4, 4, 4, 4, 0],
           "p7": [7] * 40,
           "p8": [1, 0],
           "p9": [3] * 40,
           "big": [1] * 40,
           "q1": [3] * 40,
           "q2": [4] * 40}
SCRIPTS = {n: s + [7] * (40 - len(s)) for n, s in SCRIPTS.items()}   # room to go on with ignore_eos


def scripted(raise_at=None, nan_at=None):
    def key(name):
        return tuple(PROMPTS[name])
    return ScriptedBatchedModel(VOCAB, {key(n): s for n, s in SCRIPTS.items()}, eos_token_id=EOS,
                                raise_at={key(n): s for n, s in (raise_at or {}).items()},
                                nan_at={key(n): s for n, s in (nan_at or {}).items()})


class Watch:
    """Wrap a batched model: log every forward as rows [request, cached, new] and keep
    each request's latest cache, so its blocks can be read from the allocator."""

    def __init__(self, model, prompts: dict, keep_logits: bool = False):
        self.model, self.prompts, self.keep_logits = model, prompts, keep_logits
        self.pools, self.log, self.caches, self.logits = [], [], {}, {}

    def __getattr__(self, name):      # vocab_size, eos_token_id, max_context, decode, device
        return getattr(self.model, name)

    def name_of(self, ids) -> str:
        best = None
        for name, prompt in self.prompts.items():
            if list(ids[:len(prompt)]) == list(prompt) and (best is None or len(prompt) > len(self.prompts[best])):
                best = name
        return best or "?"

    def new_pool(self, num_blocks, block_size):
        pool = self.model.new_pool(num_blocks, block_size)
        self.pools.append(pool)
        return pool

    def forward_batch(self, token_ids, caches):
        names = [self.name_of(list(ids)) for ids in token_ids]
        self.log.append([[n, int(c.length), len(ids) - int(c.length)] for n, ids, c in zip(names, token_ids, caches)])
        for n, c in zip(names, caches):
            self.caches[n] = c
        out = self.model.forward_batch(token_ids, caches)
        if self.keep_logits:
            for n, row in zip(names, out):
                self.logits.setdefault(n, []).append([float(x) for x in row.detach().cpu()])
        return out


def _blocks(watch, name) -> int:
    c = watch.caches.get(name)
    return 0 if c is None else len(c.block_table)


# ================================================================= the trace runner (probe side)

def run_trace(Engine, *, arrivals, config, model="scripted", inject=None, aborts=None, cost=None,
              tracer=False, keep_logits=False, max_steps=300, late_aborts=()):
    """Step an engine through a trace; return plain data.

    arrivals: [(step, name, params dict)]; aborts: {step: [names]} applied before that
    step; cost: (fixed, per_token) for a SimulatedCost on the engine's FakeClock.
    """
    clock = FakeClock()
    base_name = lambda name: name.split("#")[0]   # noqa: E731  "p8#3": another request with p8's prompt
    if model == "tiny":
        base, tokenizer, prompts = _tiny_model(), _tiny_tokenizer(), tiny_prompts()
    else:
        base, tokenizer, prompts = scripted(**(inject or {})), None, PROMPTS
    if cost is not None:
        base = SimulatedCost(base, clock, *cost)
    watch = Watch(base, prompts, keep_logits)
    tracer_obj = None
    if tracer:
        from course.tracing import RequestTracer
        tracer_obj = RequestTracer(clock)
    engine = Engine(watch, tokenizer, EngineConfig(**config), clock=clock, tracer=tracer_obj)
    ids, names, steps, admitted = {}, {}, [], []
    aborts = aborts or {}
    last_arrival = max(a for a, _, _ in arrivals)
    abort_blocks = {}
    for step in range(max_steps):
        for at, name, params in arrivals:
            if at == step:
                rid = engine.add_request(list(prompts[base_name(name)]), RequestParams(**params))
                ids[name], names[rid] = rid, name
        for name in aborts.get(step, []):
            engine.abort(ids[name])
            abort_blocks[name] = _blocks(watch, name)
        if step > last_arrival and not engine.has_unfinished():
            break
        n_forwards = len(watch.log)
        outs = engine.step()
        seen = {row[0] for call in watch.log[n_forwards:] for row in call if row[1] == 0}
        admitted.append(sorted(seen))
        pool = watch.pools[0]
        steps.append({"outputs": [[names.get(o.request_id, "?"), list(o.new_token_ids), o.text_delta,
                                   None if o.finish_reason is None else str(o.finish_reason),
                                   o.stop_reason] for o in outs],
                      "forwards": len(watch.log) - n_forwards,
                      "free": pool.allocator.num_free,
                      "finished_blocks": {names.get(o.request_id, "?"): _blocks(watch, names.get(o.request_id))
                                          for o in outs if o.finish_reason is not None}})
    for name in late_aborts:
        engine.abort(ids[name])
    data = {"steps": steps, "log": watch.log, "abort_blocks": abort_blocks,
            "num_blocks": watch.pools[0].num_blocks, "free_end": watch.pools[0].allocator.num_free,
            "clock": clock(), "unfinished": engine.has_unfinished(), "logits": watch.logits}
    if tracer_obj is not None:
        data["spans"] = _span_data(tracer_obj, names)
    return data


def _span_data(tracer, names):
    from course.tracing import group_by_request, request_metrics
    out = {}
    for rid, spans in group_by_request(tracer.finished_spans()).items():
        root = next(s for s in spans if s.parent is None)
        m = request_metrics(spans)
        out[names.get(rid, rid)] = {
            "stages": [s.name for s in sorted((s for s in spans if s.parent is not None),
                                              key=lambda s: (s.start_time, s.end_time))],
            "metrics": {k: m[k] for k in ("queue", "prefill", "ttft", "tpot", "e2e", "output_tokens")},
            "finish": list(root.attributes.get("gen_ai.response.finish_reasons", ()))}
    counters = {}
    for c in tracer.counters():
        counters.setdefault(c["name"], []).append([c["time"], c["value"]])
    return {"requests": out, "open": tracer.open_requests(),
            "counters": {k: counters.get(k, []) for k in ("batch_size", "kv_blocks_in_use")}}


# ---------------------------------------------------------------- the tiny model (an input)

@lru_cache(maxsize=1)
def _tiny():
    from course.batched import BatchedDecoder
    from course.decoder import CourseDecoder
    from course.tiny_model import LAB_PROMPTS

    hf, tok = shipped_model()
    dec = CourseDecoder.from_pretrained(hf)
    prompts = {f"t{i}": [int(t) for t in tok.encode(LAB_PROMPTS[j])] for i, j in enumerate((0, 7, 12, 17))}
    return BatchedDecoder(dec), tok, prompts


def _tiny_model():
    return _tiny()[0]


def _tiny_tokenizer():
    return _tiny()[1]


def tiny_prompts():
    return dict(_tiny()[2])


# ================================================================= judge helpers

def G(max_tokens=8, **kw):
    """Greedy request parameters (plain dict)."""
    return {"temperature": 0, "max_tokens": max_tokens, **kw}


def _probe(**trace):
    def probe(ns):
        Engine = engine_class(ns)
        with one_thread():
            return run_trace(Engine, **copy.deepcopy(trace))
    return probe


@lru_cache(maxsize=64)
def _expected(key):
    trace = dict(key)
    with one_thread():
        return run_trace(ref.Engine, **{k: _thaw(v) for k, v in trace.items()})


def _freeze(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return ("__list__",) + tuple(_freeze(v) for v in x)
    return x


def _thaw(x):
    if isinstance(x, tuple) and x and x[0] == "__list__":
        return [_thaw(v) for v in x[1:]]
    if isinstance(x, tuple) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], (str, int))
                                    for p in x) and x:
        return {k: _thaw(v) for k, v in x}
    return x


def expected(trace):
    return _expected(tuple((k, _freeze(v)) for k, v in sorted(trace.items())))


def per_request(data):
    """{name: {"tokens", "text", "finish", "stop_reason", "finished_at"}} from a trace's outputs."""
    out = {}
    for i, step in enumerate(data["steps"]):
        for name, new, delta, finish, stop_reason in step["outputs"]:
            r = out.setdefault(name, {"tokens": [], "text": "", "finish": None, "stop_reason": None,
                                      "finished_at": None, "after_finish": 0})
            if r["finish"] is not None:
                r["after_finish"] += 1
            r["tokens"] += new
            r["text"] += delta
            if finish is not None and r["finish"] is None:
                r["finish"], r["stop_reason"], r["finished_at"] = finish, stop_reason, i
    return out


def _data(obs, what="the trace"):
    if is_raised(obs):
        raise Fail(f"{what} could not run: your engine raised {obs['__raised__']}: {obs['message']}",
                   got=describe(obs))
    if not isinstance(obs, dict) or "steps" not in obs:
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    return obs


def _safe_probe(probe):
    @wraps(probe)
    def wrapped(ns):
        try:
            return probe(ns)
        except Fail:
            raise
        except Exception as e:  # the engine raised mid-trace: judged as a failure with its message
            return raised(e)
    return wrapped


def same_requests(trace, keys=("tokens", "finish"), hint=None, names=None):
    def judge(obs):
        got, want = per_request(_data(obs)), per_request(expected(trace))
        for name in names or sorted(want):
            g, w = got.get(name), want[name]
            if g is None:
                raise Fail(f"request {name!r} never produced an output", expected={k: w[k] for k in keys},
                           got=None, hint=hint)
            for k in keys:
                if g[k] != w[k]:
                    raise Fail(f"request {name!r}: `{k}` differs from the reference engine",
                               expected=w[k], got=g[k], hint=hint)
        if obs["unfinished"]:
            raise Fail("has_unfinished() is still True after every request ended", hint=hint)
    return judge


def case(name, points, trace, judge, **kw):
    return Case(name, points, _safe_probe(_probe(**trace)), judge, **kw)


def pool_full_at_end(obs, hint=None):
    if obs["free_end"] != obs["num_blocks"]:
        raise Fail("the KV pool is not full again after the trace", expected=obs["num_blocks"],
                   got=obs["free_end"], hint=hint or "Every ending must release the request's cache.")


def both(*judges):
    def judge(obs):
        for j in judges:
            j(obs)
    return judge


# ================================================================= TEST 1: as if alone

STAGGERED = dict(arrivals=[(0, "p1", G()), (0, "p3", G(6)), (1, "p4", G()), (2, "p5", G()), (2, "p6", G()),
                           (3, "p8", G())],
                 config={"num_blocks": 64, "block_size": 2, "max_batch": 4})
TINY = dict(model="tiny", keep_logits=True,
            arrivals=[(0, "t0", G(10)), (1, "t1", G(10)), (1, "t2", G(10)), (3, "t3", G(10))],
            config={"num_blocks": 64, "block_size": 8, "max_batch": 4})
ALONE_HINT = ("Feed each request exactly the tokens its cache lacks (prompt + generated tokens, from "
              "cache.length on), sample from ITS row of the logits, and append the token to ITS list.")


def _judge_tiny(obs):
    obs = _data(obs)
    got = per_request(obs)
    for name, prompt in tiny_prompts().items():
        want_tokens, want_logits = ref.solo_greedy(_tiny_model(), prompt, 10, int(_tiny_tokenizer().eos_token_id))
        if got.get(name, {}).get("tokens") != want_tokens:
            raise Fail(f"tiny model, request {name!r}: tokens differ from its solo run", expected=want_tokens,
                       got=got.get(name, {}).get("tokens"), hint=ALONE_HINT)
        rows = obs["logits"].get(name, [])
        if len(rows) < len(want_logits):
            raise Fail(f"tiny model, request {name!r}: fewer forward rows than tokens", expected=len(want_logits),
                       got=len(rows), hint=ALONE_HINT)
        # a preempted request has extra rows; compare the last row per token position
        for k, w in enumerate(want_logits):
            diff = (torch.tensor(rows[k]) - w).abs().max().item()
            if diff > 1e-4:
                raise Fail(f"tiny model, request {name!r}: logits of token {k} differ from its solo run by "
                           f"{diff:.2e}", expected="within 1e-4", got=diff, hint=ALONE_HINT)


def _judge_shared_forward(obs):
    obs = _data(obs)
    for i, step in enumerate(obs["steps"]):
        if step["forwards"] > 1:
            raise Fail(f"step {i} called forward_batch {step['forwards']} times", expected="at most 1 per step",
                       got=step["forwards"], hint="Put every running request (prefills and decodes) in ONE "
                                                  "forward_batch call per step.")
    mixed = any(any(r[1] == 0 for r in call) and any(r[1] > 0 for r in call) for call in obs["log"])
    if not mixed:
        raise Fail("no forward pass held a new request's prefill together with running requests' decodes",
                   hint="Admit waiting requests at the start of the step and run them in the same batch as "
                        "the decodes of the running ones (continuous batching).")


def _judge_max_batch(obs):
    obs = _data(obs)
    worst = max((len(call) for call in obs["log"]), default=0)
    if worst > 2:
        raise Fail("a forward pass held more requests than max_batch=2", expected=2, got=worst,
                   hint="Admit only while len(running) < config.max_batch.")


MAXB = dict(arrivals=[(0, n, G(4)) for n in ("p1", "p3", "p4", "p5", "p6")],
            config={"num_blocks": 64, "block_size": 2, "max_batch": 2})

AS_IF_ALONE = Test(LAB, "engine_runs_each_request_as_if_alone",
                   "continuous batching changes no request's tokens", (
    case("scripted_staggered_arrivals", 2, STAGGERED, same_requests(STAGGERED, ("tokens", "finish"), ALONE_HINT),
         visible=True),
    case("prefill_and_decode_share_a_forward", 1, STAGGERED, _judge_shared_forward),
    case("max_batch_is_respected", 1, MAXB, both(_judge_max_batch, same_requests(MAXB))),
    case("tiny_model_tokens_and_logits_equal_solo", 2, TINY, _judge_tiny),
))


# ================================================================= TEST 2: every ending

ENDINGS = dict(arrivals=[(0, "p1", G(10)), (0, "p4", G(10, stop_token_ids=[7])),
                         (0, "p2", G(10, stop=["\nUser:"])), (0, "p3", G(3)), (0, "p8", G(2))],
               config={"num_blocks": 64, "block_size": 2, "max_batch": 8})
ENDINGS_HINT = ("After appending the token check, in this order: EOS (not with ignore_eos), stop_token_ids, "
                "stop strings in the WHOLE text, then max_tokens.")
DEADLINE = dict(arrivals=[(0, "p3", G(20, deadline=2.5)), (0, "p6", G(20, deadline=1.5))],
                config={"num_blocks": 32, "block_size": 2, "max_batch": 1}, cost=(1.0, 0.0))
ERROR = dict(arrivals=[(0, "p1", G(10)), (0, "p3", G(10)), (0, "p6", G(10))], inject={"raise_at": {"p3": 2}},
             config={"num_blocks": 64, "block_size": 2, "max_batch": 8})
NAN = dict(ERROR, inject={"nan_at": {"p3": 2}})
ERROR_HINT = ("When forward_batch raises, recompute each request alone and end only those that fail alone "
              "with `error`; a NaN row ends only its request.")


def _judge_released(obs):
    obs = _data(obs)
    for i, step in enumerate(obs["steps"]):
        for name, held in step["finished_blocks"].items():
            if held:
                raise Fail(f"request {name!r} ended at step {i} but still held {held} KV block(s) after that step",
                           expected=0, got=held, hint="Release the request's cache in the same step it ends, "
                                                      "before step() returns.")
    pool_full_at_end(obs)


def _judge_no_forward_after(obs):
    obs = _data(obs)
    reqs = per_request(obs)
    forwards_by_step = []
    calls = iter(obs["log"])
    for step in obs["steps"]:
        forwards_by_step.append([next(calls, []) for _ in range(step["forwards"])])
    for name, r in reqs.items():
        if r["finished_at"] is None:
            continue
        for i in range(r["finished_at"] + 1, len(obs["steps"])):
            if any(row[0] == name for call in forwards_by_step[i] for row in call):
                raise Fail(f"request {name!r} ended at step {r['finished_at']} but was fed to the model again at "
                           f"step {i}", hint="Remove a request from `running` the moment it ends.")
        if r["after_finish"]:
            raise Fail(f"request {name!r} got {r['after_finish']} output(s) after its final one",
                       hint="A finished request must never appear in a later step's outputs.")


EVERY_ENDING = Test(LAB, "every_ending_frees_its_blocks",
                    "every ending has the right reason, keeps others running and frees blocks in its step", (
    case("eos_stop_token_stop_string_length", 2, ENDINGS,
         same_requests(ENDINGS, ("tokens", "finish", "stop_reason"), ENDINGS_HINT), visible=True),
    case("stop_string_across_tokens_never_streamed", 1, ENDINGS,
         same_requests(ENDINGS, ("text", "tokens"), "Match stop strings in the whole generated text (they span "
                       "tokens) and stream only text that can no longer become part of one (holdback).")),
    case("blocks_released_in_the_finishing_step", 2, ENDINGS, _judge_released),
    case("no_forward_after_finishing", 1, ENDINGS, _judge_no_forward_after),
    case("deadline_ends_running_and_waiting", 1, DEADLINE,
         both(same_requests(DEADLINE, ("tokens", "finish"), "Before the forward, end every request (running "
                                                             "or waiting) whose clock() - arrival >= deadline."),
              pool_full_at_end)),
    case("model_error_ends_only_its_request", 2, ERROR,
         both(same_requests(ERROR, ("tokens", "finish"), ERROR_HINT), pool_full_at_end)),
    case("nan_logits_end_only_their_request", 1, NAN,
         both(same_requests(NAN, ("tokens", "finish"), ERROR_HINT), pool_full_at_end)),
))


# ================================================================= TEST 3: abort

def _abort_trace(k):
    return dict(arrivals=[(0, "p3", G(20)), (0, "p7", G(6))], aborts={k: ["p3"]},
                config={"num_blocks": 32, "block_size": 2, "max_batch": 8})


def _judge_abort(k):
    trace = _abort_trace(k)

    def judge(obs):
        obs = _data(obs)
        if obs["abort_blocks"].get("p3"):
            raise Fail(f"abort() after {k} step(s) returned while the request still held "
                       f"{obs['abort_blocks']['p3']} KV block(s)", expected=0, got=obs["abort_blocks"]["p3"],
                       hint="abort() must release the cache itself, not only mark the request.")
        got, want = per_request(obs), per_request(expected(trace))
        g, w = got.get("p3", {"tokens": []}), want.get("p3", {"tokens": []})
        if g["tokens"] != w["tokens"] or g.get("finish") is not None:
            raise Fail(f"outputs of the request aborted after {k} step(s) differ (no output may follow abort)",
                       expected=w["tokens"], got=g["tokens"], hint="After abort(), step() says nothing more about it.")
        same_requests(trace, ("tokens", "finish"), names=["p7"])(obs)
        pool_full_at_end(obs)
    return judge


WAITING_ABORT = dict(arrivals=[(0, "p3", G(4)), (0, "p7", G(4))], aborts={1: ["p7"]},
                     config={"num_blocks": 32, "block_size": 2, "max_batch": 1})
LATE_ABORT = dict(arrivals=[(0, "p1", G(10))], late_aborts=["p1"], config={"num_blocks": 8, "block_size": 2})

ABORT = Test(LAB, "abort_frees_blocks_now", "abort() frees the request's blocks before it returns", (
    case("abort_after_two_steps", 1, _abort_trace(2), _judge_abort(2), visible=True),
    *(case(f"abort_after_{k}_steps", 1, _abort_trace(k), _judge_abort(k)) for k in (0, 1, 4)),
    case("abort_a_waiting_request", 1, WAITING_ABORT,
         both(lambda obs: _no_output(_data(obs), "p7", "An aborted waiting request leaves the queue at once and "
                                                       "never runs."),
              same_requests(WAITING_ABORT, names=["p3"]), pool_full_at_end)),
    case("late_abort_is_ignored", 1, LATE_ABORT, same_requests(LATE_ABORT)),
))


def _no_output(obs, name, hint):
    if name in per_request(obs) or any(row[0] == name for call in obs["log"] for row in call):
        raise Fail(f"request {name!r} was aborted while waiting but still ran or produced output", hint=hint)


# ================================================================= TEST 4: scheduling

# at step 5 p3 holds 3 blocks: big (5 blocks + watermark 1) does not fit yet, p8 (1 block) would
FCFS = dict(arrivals=[(0, "p3", G(12)), (5, "big", G(4)), (5, "p8", G(2))],
            config={"num_blocks": 8, "block_size": 2, "max_batch": 8, "watermark_blocks": 1})
BUDGET = dict(arrivals=[(0, n, G(12)) for n in ("p3", "p6", "p7", "p9", "p1", "p4")],
              config={"num_blocks": 12, "block_size": 2, "max_batch": 8, "watermark_blocks": 1})
PREEMPT = dict(arrivals=[(0, "p3", G(12)), (0, "p6", G(12)), (0, "p7", G(12))],
               config={"num_blocks": 9, "block_size": 2, "max_batch": 8, "watermark_blocks": 0})
WATERMARK = dict(arrivals=[(0, "p3", G(6)), (0, "p7", G(6)), (0, "p9", G(6)), (1, "p1", G(6))],
                 config={"num_blocks": 8, "block_size": 2, "max_batch": 8, "watermark_blocks": 2})


# Pool 6 x 1 token, watermark 2. q1 is preempted at step 2 and comes back holding 3 + 2
# tokens: 5 blocks + the watermark > 6. An engine that keeps the watermark with nothing
# running leaves it, and q2 behind it, waiting forever on an empty pool. Every request here
# runs alone in the pool, so all of them must end: within 5 + 4 + 2 steps of the last arrival.
LIVELOCK = dict(arrivals=[(0, "p3", G(5)), (0, "q1", G(4)), (1, "q2", G(2))],
                config={"num_blocks": 6, "block_size": 1, "max_batch": 8, "watermark_blocks": 2},
                max_steps=1 + 5 + 4 + 2)


def _judge_liveness(obs):
    obs = _data(obs)
    got = per_request(obs)
    stuck = sorted(n for _, n, _ in LIVELOCK["arrivals"] if got.get(n, {}).get("finish") is None)
    if stuck:
        raise Fail(f"request(s) {stuck} had not ended after {LIVELOCK['max_steps']} steps, although each fits "
                   "the pool alone (every step with a running request must give the oldest one a token)",
                   expected="every request ended", got={"unfinished": stuck, "free blocks at the end": obs["free_end"]},
                   hint="With nothing running, the watermark protects nobody: admit the head if its tokens fit at "
                        "all. Otherwise a preempted request that came back bigger than num_blocks - watermark_blocks "
                        "waits forever on an empty pool.")
    same_requests(LIVELOCK)(obs)
    pool_full_at_end(obs)


def _first_seen(obs):
    first = {}
    for i, call in enumerate(obs["log"]):
        for row in call:
            first.setdefault(row[0], i)
    return first


def _judge_fcfs(obs):
    obs = _data(obs)
    first = _first_seen(obs)
    if "big" not in first or ("p8" in first and first["p8"] < first["big"]):
        raise Fail("a later, smaller request ran before the oldest waiting one", expected="big before p8",
                   got={k: first.get(k) for k in ("big", "p8")},
                   hint="Admit strictly in arrival order: when the head of the queue does not fit, stop admitting "
                        "(skipping it for smaller ones can starve it forever).")
    same_requests(FCFS)(obs)


STREAM_END = 40


def _stream_trace():
    smalls = [(s, f"p8#{s}.{j}", G(3, ignore_eos=True)) for s in range(STREAM_END) for j in range(2)]
    return dict(arrivals=[(3, "big", G(4))] + smalls,
                config={"num_blocks": 10, "block_size": 2, "max_batch": 8, "watermark_blocks": 0})


def _judge_no_starvation(obs):
    obs = _data(obs)
    r = per_request(obs).get("big")
    if r is None or r["finish"] != "length" or r["finished_at"] >= STREAM_END:
        raise Fail("the big request was still not done when the stream of small requests behind it ended",
                   expected=f"finished before step {STREAM_END}", got=None if r is None else r["finished_at"],
                   hint="FCFS: the oldest waiting request goes first; requests behind it wait for it, even when "
                        "they would fit and it does not yet.")


def _judge_budget(obs):
    obs = _data(obs)
    same_requests(BUDGET, ("tokens", "finish"), "Admit a request only when the blocks for its tokens are free "
                                                "(keeping the watermark), and reserve the running requests' "
                                                "blocks before the forward.")(obs)
    pool_full_at_end(obs)


def _judge_preempted(obs):
    obs = _data(obs)
    recomputed = [row for call in obs["log"] for row in call if row[1] == 0 and row[2] > len(PROMPTS[row[0]])]
    if not recomputed:
        raise Fail("no request was preempted and recomputed, although the pool cannot hold all three to the end",
                   hint="When the running requests need more blocks than are free, preempt the newest: release "
                        "its cache and put it back at the head of the queue.")
    same_requests(PREEMPT, ("tokens", "finish"), "A preempted request keeps its generated tokens; when it runs "
                                                 "again it feeds prompt + generated tokens into a new cache.")(obs)
    pool_full_at_end(obs)


def _judge_newest(obs):
    obs = _data(obs)
    order = ["p3", "p6", "p7"]                       # arrival order
    rows = _rows_per_step(obs)
    done = set()
    for i in range(1, len(rows)):
        done |= {o[0] for o in obs["steps"][i - 1]["outputs"] if o[3] is not None}
        before = [n for n in rows[i - 1] if n not in done]
        gone = [n for n in before if n not in rows[i]]
        if gone:                                      # the first preemption
            newest = max(before, key=order.index)
            if gone[0] != newest:
                raise Fail("the first preempted request was not the newest running one", expected=newest,
                           got=gone[0], hint="Preempt running[-1] (the latest admitted), like popping a stack.")
            return
    raise Fail("no request was preempted", hint="Preempt when the running requests need more blocks than are free.")


def _rows_per_step(obs):
    out, calls = [], iter(obs["log"])
    for step in obs["steps"]:
        out.append([row[0] for _ in range(step["forwards"]) for row in next(calls, [])])
    return out


def _judge_watermark(obs):
    obs = _data(obs)
    wm = WATERMARK["config"]["watermark_blocks"]
    for i, (step, new) in enumerate(zip(obs["steps"], _admitted_per_step(obs))):
        if new and step["free"] < wm:
            raise Fail(f"step {i} admitted {new} and left {step['free']} free block(s), under the watermark",
                       expected=f">= {wm}", got=step["free"],
                       hint="Admit only while num_free - blocks(prompt) >= watermark_blocks.")
    same_requests(WATERMARK)(obs)


def _admitted_per_step(obs):
    out, calls = [], iter(obs["log"])
    for step in obs["steps"]:
        rows = [row for _ in range(step["forwards"]) for row in next(calls, [])]
        out.append(sorted(r[0] for r in rows if r[1] == 0 and r[2] == len(PROMPTS.get(r[0], []))))
    return out


def _throughput_trace(max_batch):
    return dict(arrivals=[(0, n, G(16, ignore_eos=True)) for n in ("p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8")],
                config={"num_blocks": 200, "block_size": 4, "max_batch": max_batch}, cost=(1.0, 0.05))


def _probe_throughput(ns):
    Engine = engine_class(ns)
    try:
        return {"batched": run_trace(Engine, **_throughput_trace(8)), "sequential": run_trace(Engine, **_throughput_trace(1))}
    except Exception as e:
        return raised(e)


def _judge_throughput(obs):
    if is_raised(obs):
        raise Fail(f"the throughput trace could not run: {obs['__raised__']}: {obs['message']}")
    rates = {}
    for k in ("batched", "sequential"):
        d = _data(obs[k])
        tokens = sum(len(r["tokens"]) for r in per_request(d).values())
        if tokens != 8 * 16:
            raise Fail(f"the {k} run produced {tokens} tokens", expected=128, got=tokens)
        rates[k] = tokens / d["clock"]
    if rates["batched"] < 4 * rates["sequential"]:
        raise Fail("8 concurrent requests are not 4x faster than one at a time on the cost model "
                   "(step cost = 1 + 0.05 * tokens fed)", expected=f">= {4 * rates['sequential']:.3f} tokens/s",
                   got=round(rates["batched"], 3), hint="One forward per step for ALL running requests: the fixed "
                                                        "cost is paid once per step, not once per request.")


SCHEDULING = Test(LAB, "scheduling_is_fcfs_and_preempts_the_newest",
                  "FCFS admission within the block budget, preemption by recompute, batching that pays", (
    case("fcfs_head_is_not_skipped", 2, FCFS, _judge_fcfs, visible=True),
    case("no_request_waits_forever", 2, _stream_trace(), _judge_no_starvation),
    case("admission_respects_the_block_budget", 2, BUDGET, _judge_budget),
    case("preempted_requests_keep_their_tokens", 2, PREEMPT, _judge_preempted),
    case("preempts_the_newest", 1, PREEMPT, _judge_newest),
    case("watermark_kept_at_admission", 1, WATERMARK, _judge_watermark),
    case("every_admissible_request_finishes", 2, LIVELOCK, _judge_liveness),
    Case("throughput_on_the_cost_model", 2, _probe_throughput, _judge_throughput),
))


# ================================================================= TEST 5: spans and metrics

SPANS = dict(arrivals=[(0, "p1", G()), (0, "p8", G()), (1, "p4", G()), (2, "p3", G(3))],
             aborts={4: ["p3"]}, config={"num_blocks": 64, "block_size": 2, "max_batch": 2}, cost=(1.0, 0.1),
             tracer=True)
SPAN_HINT = ("start_request at arrival (it opens `queue`), start_stage 'prefill' when admitted, a token event at "
             "clock() AFTER the forward that chose it, 'decode' after the first token, end_request at the ending.")


def _spans(obs):
    obs = _data(obs)
    if "spans" not in obs:
        raise Fail("no spans were recorded")
    return obs["spans"]


def _judge_spans(key, hint=SPAN_HINT):
    def judge(obs):
        got, want = _spans(obs), expected(SPANS)["spans"]
        if got["open"]:
            raise Fail("some requests still have open spans after the trace", got=got["open"],
                       hint="Call tracer.end_request on every ending, abort included.")
        for name in sorted(want["requests"]):
            g = got["requests"].get(name)
            w = want["requests"][name]
            if g is None:
                raise Fail(f"request {name!r} has no spans", hint=hint)
            if key == "metrics":
                for m, e in w["metrics"].items():
                    v = g["metrics"].get(m)
                    if (e is None) != (v is None) or (e is not None and abs(v - e) > 1e-9):
                        raise Fail(f"request {name!r}: `{m}` from its spans is wrong", expected=e, got=v, hint=hint)
            elif g[key] != w[key]:
                raise Fail(f"request {name!r}: `{key}` of its spans differ", expected=w[key], got=g[key], hint=hint)
    return judge


def _judge_counters(obs):
    got, want = _spans(obs)["counters"], expected(SPANS)["spans"]["counters"]
    for name in ("batch_size", "kv_blocks_in_use"):
        if got.get(name) != want[name]:
            raise Fail(f"the `{name}` counter samples ([time, value] per step) differ", expected=want[name],
                       got=got.get(name), hint="At the end of every step: tracer.counter('batch_size', requests in "
                                               "the forward) and tracer.counter('kv_blocks_in_use', used blocks).")


TRACING = Test(LAB, "spans_and_metrics_through_the_tracer",
               "queue/prefill/decode spans, token events and per-step counters on the Lab 06 tracer", (
    case("stages_per_request", 1, SPANS, _judge_spans("stages"), visible=True),
    case("ttft_tpot_queue_per_request", 2, SPANS, _judge_spans("metrics")),
    case("finish_reasons_on_spans", 1, SPANS, _judge_spans("finish")),
    case("counters_per_step", 1, SPANS, _judge_counters),
))


# ================================================================= TEST 6: admission control

def _probe_admission(ns):
    function(ns, "check_admission")       # add_request needs only this one
    Engine = function(ns, "Engine")
    out = {}

    def attempt(key, engine, prompt, params):
        try:
            engine.add_request(prompt, RequestParams(**params))
            out[key] = "accepted"
        except Exception as e:
            out[key] = raised(e)

    e = Engine(scripted(), None, EngineConfig(num_blocks=8, block_size=2, max_waiting=2), clock=FakeClock())
    attempt("first", e, [8], G(4))
    attempt("second", e, [9], G(4))
    attempt("third", e, [10], G(4))
    e2 = Engine(scripted(), None, EngineConfig(num_blocks=4, block_size=2, watermark_blocks=0), clock=FakeClock())
    attempt("too_big", e2, [8], G(9))       # 1 + 9 - 1 = 9 tokens: 5 blocks of 2 > 4
    attempt("just_fits", e2, [8], G(8))     # 8 tokens: 4 blocks
    e3 = Engine(scripted(), None, EngineConfig(num_blocks=4, block_size=2, watermark_blocks=3), clock=FakeClock())
    attempt("fits_alone", e3, list(PROMPTS["q1"]), G(2))   # 3 + 2 - 1 = 4 tokens: 2 blocks; the watermark does not count
    attempt("empty", e2, [], G(4))
    attempt("out_of_vocab", e2, [99], G(4))
    return out


def _judge_queue_full(obs):
    if obs.get("first") != "accepted" or obs.get("second") != "accepted":
        raise Fail("requests under max_waiting were refused", got=obs)
    g = obs.get("third")
    if not is_raised(g) or g["__raised__"] != "QueueFull":
        raise Fail("a request beyond max_waiting=2 waiting was not refused with QueueFull", expected="QueueFull",
                   got=describe(g) if g is not None else None,
                   hint="Raise QueueFull in add_request when len(waiting) >= max_waiting: say no now (HTTP 429).")


def _judge_refused(obs):
    g = obs.get("too_big")
    if not is_raised(g) or g["__raised__"] != "RequestRefused":
        raise Fail("a request whose prompt + max_tokens - 1 tokens can never fit the pool was not refused",
                   expected="RequestRefused", got=describe(g) if g is not None else None,
                   hint="blocks_needed(len(prompt) + max_tokens - 1, block_size) > num_blocks: it would wait forever.")
    if obs.get("fits_alone") != "accepted":
        raise Fail("a request that fits the pool alone was refused because of the watermark", expected="accepted",
                   got=describe(obs.get("fits_alone")),
                   hint="Refuse only what could not run alone in an empty pool: the watermark is a reserve for "
                        "running requests, and a request that runs alone has nobody to keep it for.")
    if obs.get("just_fits") != "accepted":
        raise Fail("a request that fits the pool exactly was refused", expected="accepted",
                   got=describe(obs.get("just_fits")), hint="The last token is returned, never fed back: "
                                                            "count prompt + max_tokens - 1 tokens.")


def _judge_bad_prompt(obs):
    rejects({"result": obs.get("empty")}, "add_request([], params)", "prompt_ids", [])
    rejects({"result": obs.get("out_of_vocab")}, "add_request([99], params)", "prompt_ids", 99)


ADMISSION = Test(LAB, "admission_says_no_early", "a full queue, a request that never fits, a bad prompt", (
    Case("queue_full", 1, _probe_admission, _judge_queue_full, visible=True),
    Case("refuses_what_never_fits", 1, _probe_admission, _judge_refused),
    Case("rejects_bad_prompt_ids", 1, _probe_admission, _judge_bad_prompt),
))


# ================================================================= TEST 7: evidence (replay Lab 03 samples)

# The runs of Lab 03's failure-log demo; the abnormal ones are its saved samples (inputs,
# built from course.acceptance in whichever process needs them).
LAB03_SPECS = (
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}},
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 2}},
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "stop": ["\nUser:"]}, "inject": {"cancel_at": 7}},
    {"fixture": "stop_string_3_tokens", "params": {"max_tokens": 16, "deadline": 0.5},
     "inject": {"seconds_per_call": 0.2}},
    {"fixture": "eos_at_step_3", "params": {"max_tokens": 8}, "inject": {"raise_at": 2}},
    {"fixture": "content_filter_banned_word", "params": {"max_tokens": 16}, "inject": {"banned_words": ["swordfish"]}},
    {"fixture": "sampled_coin_flips", "params": {"max_tokens": 6}, "seed": 3},
)


@lru_cache(maxsize=1)
def _samples():
    from course.acceptance import failure_record, run_spec
    from course.finish import FinishReason
    runs = [(spec, run_spec(spec)) for spec in LAB03_SPECS]
    return tuple(failure_record(spec, r) for spec, r in runs if r.finish_reason is not FinishReason.STOP)


def _sample(reason, seeded=False):
    for s in _samples():
        if s["finish_reason"] == reason and (s.get("seed") is not None) == seeded:
            return copy.deepcopy(s)
    raise KeyError(reason)


def _probe_replay(reason, seeded=False):
    def probe(ns):
        fn = function(ns, "replay_in_engine")
        Engine = engine_class(ns)
        try:
            return {"result": fn(Engine, _sample(reason, seeded))}
        except Exception as e:
            return {"result": raised(e)}
    return probe


def _judge_replay(reason, seeded=False):
    def judge(obs):
        got = obs["result"]
        if is_raised(got):
            raise Fail(f"replay_in_engine on the `{reason}` sample raised {got['__raised__']}: {got['message']}")
        want = ref.replay_in_engine(ref.Engine, _sample(reason, seeded))
        if want is None:
            if got is not None:
                raise Fail("a sample that needs a content filter must be reported as not replayable (None)",
                           expected=None, got=describe(got))
            return
        if not isinstance(got, dict):
            raise Fail("replay_in_engine should return a dict", expected=sorted(want), got=describe(got))
        for k in ("tokens", "finish_reason", "text", "kv_blocks_used_after"):
            if got.get(k) != want[k]:
                raise Fail(f"replaying the saved `{reason}` sample: `{k}` is wrong", expected=want[k], got=got.get(k),
                           hint="Build the model with ScriptedBatchedModel.from_fixture, the clock cost with "
                                "SimulatedCost, abort at cancel_at tokens, and join the streamed text deltas.")
    return judge


EVIDENCE = Test(LAB, "failure_samples_replay_through_the_engine",
                "Lab 03's saved failure samples, replayed through the engine", (
    Case("replays_length", 1, _probe_replay("length"), _judge_replay("length"), visible=True),
    Case("replays_cancelled", 1, _probe_replay("cancelled"), _judge_replay("cancelled")),
    Case("replays_timeout", 1, _probe_replay("timeout"), _judge_replay("timeout")),
    Case("replays_error", 1, _probe_replay("error"), _judge_replay("error")),
    Case("replays_seeded_sample", 1, _probe_replay("length", True), _judge_replay("length", True)),
    Case("content_filter_sample_is_not_replayable", 1, _probe_replay("content_filter"),
         _judge_replay("content_filter")),
))


# ================================================================= the tests

TESTS = [single_threaded(t) for t in (AS_IF_ALONE, EVERY_ENDING, ABORT, SCHEDULING, TRACING, ADMISSION, EVIDENCE)]

__all__ = ["API", "TESTS", "run_trace", "Watch", "scripted"]
