"""lab07's inputs, built in the student's process (sent to the sandboxed child with the probes):
the scripted world, the byte tokenizer, the TRACES table, `Watch` and `run_trace` (the shipped
model is loaded in _tiny.py, the Lab 03 samples built in _samples.py). No reference here;
probes.py holds the probes.
"""
from __future__ import annotations

from course.batched import EngineConfig, RequestParams, ScriptedBatchedModel, SimulatedCost
from course.clock import FakeClock

from autograder.checks import audited, ledger_counts
from autograder.core import function

from ._policy import HELD_TRACES, POLICY_TRACES
from ._tiny import tiny_model, tiny_prompts, tiny_tokenizer

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


def scripted(raise_at=None, nan_at=None, max_context=1024):
    def key(name):
        return tuple(PROMPTS[name])
    return ScriptedBatchedModel(VOCAB, {key(n): s for n, s in SCRIPTS.items()}, eos_token_id=EOS,
                                raise_at={key(n): s for n, s in (raise_at or {}).items()},
                                nan_at={key(n): s for n, s in (nan_at or {}).items()}, max_context=max_context)


# Byte pieces for the same ids, for the "bytes" traces: ids 5 and 6 are the two halves of
# "\u4e2d" (UTF-8 e4 b8 ad), so after id 5 the decoded text ends with half a character ("\ufffd").
BYTE_PIECES = [v.encode() for v in VOCAB]
BYTE_PIECES[5], BYTE_PIECES[6] = b"\xe4\xb8", b"\xad"


# For the "mixed_bytes" traces, a token holds whole characters and then half of one: id 4 is
# "rld" + the first two bytes of "\u4e2d", id 7 its last byte + "!".
MIXED_PIECES = list(BYTE_PIECES)
MIXED_PIECES[4], MIXED_PIECES[7] = b"rld\xe4\xb8", b"\xad!"


class ByteTokenizer:
    """A byte-level tokenizer over BYTE_PIECES: decode joins the bytes and replaces an
    incomplete UTF-8 sequence with "\ufffd", as a real BPE tokenizer's decode does."""

    eos_token_id = EOS
    pieces = BYTE_PIECES

    def decode(self, ids):
        return b"".join(self.pieces[int(i)] for i in ids).decode("utf-8", errors="replace")


class MixedByteTokenizer(ByteTokenizer):
    pieces = MIXED_PIECES


TOKENIZERS = {"vocab": lambda: None, "bytes": ByteTokenizer, "mixed_bytes": MixedByteTokenizer}


def G(max_tokens=8, **kw):
    """Greedy request parameters (plain dict)."""
    return {"temperature": 0, "max_tokens": max_tokens, **kw}


def _abort_trace(k):
    return dict(arrivals=[(0, "p3", G(20)), (0, "p7", G(6))], aborts={k: ["p3"]},
                config={"num_blocks": 32, "block_size": 2, "max_batch": 8})


STREAM_END = 40     # the small requests of the "stream" trace arrive at steps 0 .. STREAM_END - 1
ERROR = dict(arrivals=[(0, "p1", G(10)), (0, "p3", G(10)), (0, "p6", G(10))], inject={"raise_at": {"p3": 2}},
             config={"num_blocks": 64, "block_size": 2, "max_batch": 8})
TRACES = {
    # engine_runs_each_request_as_if_alone
    "staggered": dict(arrivals=[(0, "p1", G()), (0, "p3", G(6)), (1, "p4", G()), (2, "p5", G()), (2, "p6", G()),
                                (3, "p8", G())], config={"num_blocks": 64, "block_size": 2, "max_batch": 4}),
    "max_batch": dict(arrivals=[(0, n, G(4)) for n in ("p1", "p3", "p4", "p5", "p6")],
                      config={"num_blocks": 64, "block_size": 2, "max_batch": 2}),
    "tiny": dict(model="tiny", keep_logits=True,
                 arrivals=[(0, "t0", G(10)), (1, "t1", G(10)), (1, "t2", G(10)), (3, "t3", G(10))],
                 config={"num_blocks": 64, "block_size": 8, "max_batch": 4}),
    # every_ending_frees_its_blocks
    "endings": dict(arrivals=[(0, "p1", G(10)), (0, "p4", G(10, stop_token_ids=[7])),
                              (0, "p2", G(10, stop=["\nUser:"])), (0, "p3", G(3)), (0, "p8", G(2))],
                    config={"num_blocks": 64, "block_size": 2, "max_batch": 8}),
    # p1 arrives at 1.0 s and waits: it is due at exactly 3.0 s (clock() - arrival == deadline)
    "deadline": dict(arrivals=[(0, "p3", G(20, deadline=2.5)), (0, "p6", G(20, deadline=1.5)),
                               (1, "p1", G(20, deadline=2.0))],
                     config={"num_blocks": 32, "block_size": 2, "max_batch": 1}, cost=(1.0, 0.0)),
    "error": ERROR,
    # a batch of exactly two: the batched call fails, each runs alone, only p3 ends with `error`
    "error_pair": dict(arrivals=[(0, "p1", G(10)), (0, "p3", G(10))], inject={"raise_at": {"p3": 2}},
                       config={"num_blocks": 64, "block_size": 2, "max_batch": 8}),
    # text held back for a stop string when EOS (p1: "rld" of "rld!") or a stop token (p4: "ld"
    # of "ld!") ends the request: the final delta carries it
    "held_at_the_end": dict(arrivals=[(0, "p1", G(10, stop=["rld!"])),
                                      (0, "p4", G(10, stop_token_ids=[7], stop=["ld!"]))],
                            config={"num_blocks": 64, "block_size": 2, "max_batch": 8}),
    "nan": dict(ERROR, inject={"nan_at": {"p3": 2}}),
    # at step 2 the model writes p1's and p6's caches, then raises for p3 (and raises for p3 alone)
    "partial_write": dict(ERROR, inject={"fail_after_write": {"p3": 2}}),
    # p2's text is "Hello" + "\u4e2d" (two tokens: after the first, the text ends with "\ufffd") + "!!"
    "half_character": dict(arrivals=[(0, "p2", G(6)), (0, "p1", G(6))], text="bytes",
                           config={"num_blocks": 32, "block_size": 2, "max_batch": 8}),
    # p4's text is " wo" + "rld" and half of "\u4e2d" (one token) + the rest of it and "!": "rld" is safe at once
    "text_before_half_character": dict(arrivals=[(0, "p4", G(6))], text="mixed_bytes",
                                       config={"num_blocks": 32, "block_size": 2, "max_batch": 8}),
    # the stop token and the stop string are kept in the text
    "include_stop": dict(arrivals=[(0, "p4", G(10, stop_token_ids=[7], include_stop_str_in_output=True)),
                                   (0, "p2", G(10, stop=["\nUser:"], include_stop_str_in_output=True))],
                         config={"num_blocks": 64, "block_size": 2, "max_batch": 8}),
    # abort_frees_blocks_now
    **{f"abort_after_{k}": _abort_trace(k) for k in (0, 1, 2, 4)},
    "waiting_abort": dict(arrivals=[(0, "p3", G(4)), (0, "p7", G(4))], aborts={1: ["p7"]},
                          config={"num_blocks": 32, "block_size": 2, "max_batch": 1}),
    # the preempt trace, with p7 aborted while it waits after its preemption (step 8)
    "abort_preempted": dict(arrivals=[(0, "p3", G(12)), (0, "p6", G(12)), (0, "p7", G(12))], aborts={10: ["p7"]},
                            config={"num_blocks": 9, "block_size": 2, "max_batch": 8, "watermark_blocks": 0}),
    "late_abort": dict(arrivals=[(0, "p1", G(10))], late_aborts=["p1"], config={"num_blocks": 8, "block_size": 2}),
    # scheduling_is_fcfs_and_preempts_the_newest
    # at step 5 p3 holds 3 blocks: big (5 blocks + watermark 1) does not fit yet, p8 (1 block) would
    "fcfs": dict(arrivals=[(0, "p3", G(12)), (5, "big", G(4)), (5, "p8", G(2))],
                 config={"num_blocks": 8, "block_size": 2, "max_batch": 8, "watermark_blocks": 1}),
    "stream": dict(arrivals=[(3, "big", G(4))] + [(s, f"p8#{s}.{j}", G(3, ignore_eos=True))
                                                   for s in range(STREAM_END) for j in range(2)],
                   config={"num_blocks": 10, "block_size": 2, "max_batch": 8, "watermark_blocks": 0}),
    "budget": dict(arrivals=[(0, n, G(12)) for n in ("p3", "p6", "p7", "p9", "p1", "p4")],
                   config={"num_blocks": 12, "block_size": 2, "max_batch": 8, "watermark_blocks": 1}),
    "preempt": dict(arrivals=[(0, "p3", G(12)), (0, "p6", G(12)), (0, "p7", G(12))],
                    config={"num_blocks": 9, "block_size": 2, "max_batch": 8, "watermark_blocks": 0}),
    # Pool 6 x 2 tokens: the newest is preempted again and again; p9 twice
    "preempt_twice": dict(arrivals=[(0, n, G(8)) for n in ("p3", "p6", "p7", "p9")],
                          config={"num_blocks": 6, "block_size": 2, "max_batch": 8, "watermark_blocks": 0}),
    # Pool 4 x 2 tokens, watermark 2. At step 2 p3 holds 2 blocks (3 tokens): p7 (1 block) would
    # fit but would leave 1 free block, under the watermark, so it waits until p3 ends (step 7)
    # and runs alone from step 8.
    "watermark_waits": dict(arrivals=[(0, "p3", G(8)), (2, "p7", G(2))],
                            config={"num_blocks": 4, "block_size": 2, "max_batch": 8, "watermark_blocks": 2}),
    # Pool 5 x 1 token, max_batch 2: q1 waits behind p3 and p7. At step 2 p7 is preempted and
    # goes back to the FRONT of the queue: when p3 ends (step 3), p7 runs again (steps 4-5)
    # before q1 (step 6); each of the two needs 3 blocks, so only one fits at step 4.
    "preempt_front": dict(arrivals=[(0, "p3", G(4)), (0, "p7", G(4)), (0, "q1", G(2))],
                          config={"num_blocks": 5, "block_size": 1, "max_batch": 2, "watermark_blocks": 0}),
    # big's 10 tokens fill all 5 blocks of 2 (max_tokens 1: nothing more is fed): with nothing
    # running the watermark is waived, and a head may leave exactly 0 = what is kept back
    "whole_pool": dict(arrivals=[(0, "big", G(1))],
                       config={"num_blocks": 5, "block_size": 2, "max_batch": 8, "watermark_blocks": 1}, max_steps=6),
    "watermark": dict(arrivals=[(0, "p3", G(6)), (0, "p7", G(6)), (0, "p9", G(6)), (1, "p1", G(6))],
                      config={"num_blocks": 8, "block_size": 2, "max_batch": 8, "watermark_blocks": 2}),
    # Pool 6 x 1 token, watermark 2. q1 is preempted at step 2 and comes back holding 3 + 2
    # tokens: 5 blocks + the watermark > 6. An engine that keeps the watermark with nothing
    # running leaves it, and q2 behind it, waiting forever on an empty pool. Every request here
    # runs alone in the pool, so all of them must end: within 5 + 4 + 2 steps of the last arrival.
    "livelock": dict(arrivals=[(0, "p3", G(5)), (0, "q1", G(4)), (1, "q2", G(2))],
                     config={"num_blocks": 6, "block_size": 1, "max_batch": 8, "watermark_blocks": 2},
                     max_steps=1 + 5 + 4 + 2),
    **{f"throughput_{b}": dict(arrivals=[(0, n, G(16, ignore_eos=True)) for n in ("p1", "p2", "p3", "p4", "p5",
                                                                                 "p6", "p7", "p8")],
                               config={"num_blocks": 200, "block_size": 4, "max_batch": b}, cost=(1.0, 0.05))
       for b in (1, 8)},
    # spans_and_metrics_through_the_tracer
    "spans": dict(arrivals=[(0, "p1", G()), (0, "p8", G()), (1, "p4", G()), (2, "p3", G(3))],
                  aborts={4: ["p3"]}, config={"num_blocks": 64, "block_size": 2, "max_batch": 2}, cost=(1.0, 0.1),
                  tracer=True),
    # the preempt trace on the tracer: the preempted request's spans go back to `queue`
    "spans_preempt": dict(arrivals=[(0, "p3", G(12)), (0, "p6", G(12)), (0, "p7", G(12))],
                          config={"num_blocks": 9, "block_size": 2, "max_batch": 8, "watermark_blocks": 0},
                          cost=(1.0, 0.1), tracer=True),
}
TRACES.update(POLICY_TRACES, **HELD_TRACES)      # the admission policy's bound, held text (_policy.py)


class Watch:
    """Wrap a batched model: log every forward as rows [request, cached, new] and keep
    each request's latest cache, so its blocks can be read from the allocator."""

    def __init__(self, model, prompts: dict, keep_logits: bool = False, fail_after_write=None, clock=None):
        self.model, self.prompts, self.keep_logits = model, prompts, keep_logits
        self.fail_after_write = dict(fail_after_write or {})    # {name: step}: write the others, then raise
        self.pools, self.log, self.caches, self.logits = [], [], {}, {}
        self.clock, self.times = clock, []                      # with a clock: its time after each forward

    def __getattr__(self, name):      # vocab_size, eos_token_id, max_context, decode, device
        return getattr(self.model, name)

    def name_of(self, ids) -> str:
        best = None
        for name, prompt in self.prompts.items():
            if list(ids[:len(prompt)]) == list(prompt) and (best is None or len(prompt) > len(self.prompts[best])):
                best = name
        return best or "?"

    def new_pool(self, num_blocks, block_size):
        pool = audited(self.model.new_pool(num_blocks, block_size))    # blocks counted by the grader
        self.pools.append(pool)
        return pool

    def forward_batch(self, token_ids, caches):
        names = [self.name_of(list(ids)) for ids in token_ids]
        self.log.append([[n, int(c.length), len(ids) - int(c.length)] for n, ids, c in zip(names, token_ids, caches)])
        for n, c in zip(names, caches):
            self.caches[n] = c
        failing = [i for i, (n, ids) in enumerate(zip(names, token_ids))
                   if n in self.fail_after_write and len(ids) - len(self.prompts[n]) == self.fail_after_write[n]]
        if failing:
            rest = [i for i in range(len(names)) if i not in failing]
            if rest:                          # the other rows' caches are written before the failure
                self.model.forward_batch([token_ids[i] for i in rest], [caches[i] for i in rest])
            raise RuntimeError(f"injected failure for {names[failing[0]]!r} after writing the batch's other rows")
        try:
            out = self.model.forward_batch(token_ids, caches)
        finally:
            if self.clock is not None:
                self.times.append(self.clock())
        if self.keep_logits:
            for n, row in zip(names, out):
                self.logits.setdefault(n, []).append([float(x) for x in row.detach().cpu()])
        return out


def _blocks(watch, name) -> int:
    c = watch.caches.get(name)
    return 0 if c is None else len(c.block_table)


def admission_attempts(Engine) -> dict:
    """add_request on small engines: {attempt: "accepted" or the exception record}. The tests
    run the same attempts on the reference engine."""
    from autograder.core import raised
    out = {}

    def attempt(key, engine, prompt, params):
        try:
            engine.add_request(prompt, None if params is None else RequestParams(**params))
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
    attempt("fits_alone", e3, list(PROMPTS["q1"]), G(2))   # 3 + 2 - 1 = 4 tokens: 2 blocks; no watermark alone
    attempt("empty", e2, [], G(4))
    attempt("out_of_vocab", e2, [99], G(4))
    attempt("id_zero", e2, [0], G(4))                 # 0 is an id like any other
    attempt("id_vocab_size", e2, [len(VOCAB)], G(4))  # one past the last id
    attempt("float_id", e2, [8.0], G(4))              # not an int
    e4 = Engine(scripted(), None, EngineConfig(num_blocks=8, block_size=2), clock=FakeClock())
    for key, params in (("dict_params", G(4)), ("none_params", None)):
        try:
            e4.add_request([8], params)
            out[key] = "accepted"
        except Exception as err:
            out[key] = raised(err)
    e5 = Engine(scripted(max_context=4), None, EngineConfig(num_blocks=64, block_size=2), clock=FakeClock())
    attempt("past_context", e5, [8], G(5))     # 1 + 5 - 1 = 5 tokens > a context of 4
    attempt("at_context", e5, [8], G(4))       # 4 tokens: exactly the context
    return out


# ================================================================= the trace runner

def run_trace(Engine, *, arrivals, config, model="scripted", inject=None, aborts=None, cost=None,
              tracer=False, keep_logits=False, max_steps=300, late_aborts=(), text="vocab"):
    """Step an engine through a trace; return plain data.

    arrivals: [(step, name, params dict)]; aborts: {step: [names]} applied before that
    step; cost: (fixed, per_token) for a SimulatedCost on the engine's FakeClock; text "bytes" or
    "mixed_bytes": the engine decodes with that TOKENIZERS entry; inject["fail_after_write"]: the
    Watch's. The tests run the same function on the reference engine.
    """
    clock = FakeClock()
    fail_after_write = None
    base_name = lambda name: name.split("#")[0]   # noqa: E731  "p8#3": another request with p8's prompt
    if model == "tiny":
        base, tokenizer, prompts = tiny_model(), tiny_tokenizer(), tiny_prompts()
    else:
        inject = dict(inject or {})
        fail_after_write = inject.pop("fail_after_write", None)
        base, tokenizer, prompts = scripted(**inject), TOKENIZERS[text](), PROMPTS
    if cost is not None:
        base = SimulatedCost(base, clock, *cost)
    watch = Watch(base, prompts, keep_logits, fail_after_write if model != "tiny" else None)
    tracer_obj = None
    if tracer:
        from course.tracing import RequestTracer
        tracer_obj = RequestTracer(clock)
    engine = Engine(watch, tokenizer, EngineConfig(**config), clock=clock, tracer=tracer_obj)
    ids, names, steps = {}, {}, []
    aborts = aborts or {}
    last_arrival = max(a for a, _, _ in arrivals)
    abort_blocks, preempted = {}, {}
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
        for req in list(engine.running) + list(engine.waiting):     # req.preemptions, as the engine counts it
            key = names.get(req.id, "?")
            preempted[key] = max(preempted.get(key, 0), req.preemptions)
        pool = watch.pools[0]
        steps.append({"outputs": [[names.get(o.request_id, "?"), list(o.new_token_ids), o.text_delta,
                                   None if o.finish_reason is None else str(o.finish_reason),
                                   o.stop_reason] for o in outs],
                      "forwards": len(watch.log) - n_forwards,
                      "free": ledger_counts(pool)["num_free"],
                      "finished_blocks": {names.get(o.request_id, "?"): _blocks(watch, names.get(o.request_id))
                                          for o in outs if o.finish_reason is not None}})
    for name in late_aborts:
        engine.abort(ids[name])
    data = {"steps": steps, "log": watch.log, "abort_blocks": abort_blocks,
            "num_blocks": watch.pools[0].num_blocks, "free_end": ledger_counts(watch.pools[0])["num_free"],
            "clock": clock(), "unfinished": engine.has_unfinished(), "logits": watch.logits,
            "records": _records(engine, names, preempted)}
    if tracer_obj is not None:
        data["spans"] = _span_data(tracer_obj, names)
    return data


def _records(engine, names, preempted):
    """What the engine keeps about itself once the trace has run: engine.preemptions,
    engine.finished_by_reason, each request's req.preemptions (the most seen while it was
    queued or running) and its kept final output [tokens, text, finish reason, usage]
    (engine.finished; an engine without that dict is asked final_output(request_id))."""
    book = getattr(engine, "finished", None)
    get = book.get if isinstance(book, dict) else getattr(engine, "final_output", lambda rid: None)
    finals = {}
    for rid, name in names.items():
        try:
            o = get(rid)
        except KeyError:
            o = None
        finals[name] = None if o is None else [list(o.new_token_ids), o.text_delta,
                                               None if o.finish_reason is None else str(o.finish_reason),
                                               dict(o.usage) if isinstance(o.usage, dict) else o.usage]
    return {"preemptions": engine.preemptions, "finished_by_reason": dict(engine.finished_by_reason),
            "req_preemptions": {k: v for k, v in preempted.items() if v}, "finals": finals}


def _span_data(tracer, names):
    from course.tracing import group_by_request, request_metrics
    out = {}
    for rid, spans in group_by_request(tracer.finished_spans()).items():
        root = next(s for s in spans if s.parent is None)
        m = request_metrics(spans)
        stages = sorted((s for s in spans if s.parent is not None), key=lambda s: (s.start_time, s.end_time))
        out[names.get(rid, rid)] = {
            "stages": [s.name for s in stages],
            # tokens per segment: [stage, tokens it fed (prefill), tokens chosen while it was open]
            "segments": [[s.name, (s.attributes or {}).get("gen_ai.usage.input_tokens"),
                          (s.attributes or {}).get("gen_ai.usage.output_tokens")] for s in stages],
            "metrics": {k: m[k] for k in ("queue", "prefill", "ttft", "tpot", "e2e", "output_tokens")},
            "finish": list(root.attributes.get("gen_ai.response.finish_reasons", ()))}
    counters = {}
    for c in tracer.counters():
        counters.setdefault(c["name"], []).append([c["time"], c["value"]])
    return {"requests": out, "open": tracer.open_requests(),
            "counters": {k: counters.get(k, []) for k in ("batch_size", "kv_blocks_in_use")}}
