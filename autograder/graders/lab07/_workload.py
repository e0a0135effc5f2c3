"""lab07's performance workload, built in the student's process (sent to the sandboxed child
with the probes): WORKLOAD, its scripted model and prompts, and `run_workload`, which steps an
engine through it on the grader's FakeClock and returns the Watch's log. No reference here; the
judge (performance.py) times every token from that log.
"""
from __future__ import annotations

from course.batched import EngineConfig, RequestParams, ScriptedBatchedModel, SimulatedCost
from course.clock import FakeClock

from ._inputs import EOS, VOCAB, Watch

# 32 requests on a scripted model, in four bursts (at 0, 0.15, 0.35 and 0.5 s of the grader's
# FakeClock): (arrival, prompt tokens, max_tokens, the step at which its script says EOS, or
# None). Most answers are short and a few long, so how many requests an engine admits per step
# decides how full its batch stays; the pool (32 blocks of 4 tokens) holds about five average
# requests, so admission waits for blocks and a long one gets preempted. Three requests are
# aborted: two long ones while they run, one while it may still wait. The admission policy may
# pass a waiting request up to 4 times (max_overtakes): the reference stays first come, first
# served, and a policy that lets small requests fill the free blocks gets other figures.
WORKLOAD_REQUESTS = (
    (0.00, 24, 3, None), (0.00, 4, 24, None), (0.00, 12, 4, None), (0.00, 32, 6, None),
    (0.00, 6, 2, None), (0.00, 16, 5, 3), (0.00, 8, 16, None), (0.00, 2, 3, None),
    (0.00, 20, 4, None), (0.00, 10, 8, None), (0.15, 28, 2, None), (0.15, 3, 28, 17),
    (0.15, 14, 5, None), (0.15, 5, 3, None), (0.15, 18, 6, None), (0.15, 9, 12, None),
    (0.15, 30, 4, None), (0.15, 7, 2, None), (0.35, 22, 20, None), (0.35, 11, 5, 2),
    (0.35, 4, 3, None), (0.35, 26, 6, None), (0.35, 13, 2, None), (0.35, 2, 30, None),
    (0.35, 17, 4, None), (0.35, 6, 8, None), (0.50, 15, 3, None), (0.50, 8, 14, None),
    (0.50, 19, 5, None), (0.50, 3, 2, None), (0.50, 12, 6, None), (0.50, 5, 4, None),
)
WORKLOAD = dict(
    requests=[(at, f"w{i:02d}", n, m) for i, (at, n, m, _) in enumerate(WORKLOAD_REQUESTS)],
    aborts={"w01": 0.2, "w23": 0.6, "w27": 0.55},            # seconds: the client goes away then
    config={"num_blocks": 32, "block_size": 4, "max_batch": 8, "watermark_blocks": 1, "max_overtakes": 4},
    cost=(0.020, 0.0004, 0.00002),                            # a + b * tokens fed + c * tokens cached
    max_steps=2000)


def workload_prompts() -> dict:
    """{name: prompt ids}: each starts with its own pair of ids among 8..16, so no prompt is
    the start of another request's tokens (the Watch names every row right)."""
    out = {}
    for i, (_, n, _, _) in enumerate(WORKLOAD_REQUESTS):
        head = [8 + i % 9, 8 + i // 9]
        out[f"w{i:02d}"] = (head + [1 + (i + k) % 7 for k in range(n)])[:n]
    return out


def workload_model() -> ScriptedBatchedModel:
    """The scripted model of the workload: request i plays ids 1..7 in turn from an offset of
    its own, and EOS at its eos step (when it has one)."""
    scripts = {}
    for i, (name, prompt) in enumerate(workload_prompts().items()):
        _, _, max_tokens, eos_at = WORKLOAD_REQUESTS[i]
        script = [1 + (3 * i + k) % 7 for k in range(max_tokens + 4)]
        if eos_at is not None:
            script[eos_at] = EOS
        scripts[tuple(prompt)] = script
    return ScriptedBatchedModel(VOCAB, scripts, eos_token_id=EOS)


def run_workload(Engine, *, requests, aborts, config, cost, max_steps):
    """Run the workload on the engine; the clock is the grader's FakeClock, advanced by the
    cost model of each forward and, when the engine has nothing to run, to the next arrival.

    Returns plain data: "log" and "times" (the Watch's rows per forward and the clock after
    each), "events" in order ["idle", forwards so far, seconds skipped] / ["abort", forwards
    so far, name], and per request its "tokens" and "finish" (what the engine said), "arrival",
    "ended_at" (the forward count when the engine said it ended) and "aborted". Figures (TTFT,
    makespan) are computed by the judge from the log, never from what the engine reports.
    """
    clock = FakeClock()
    prompts = workload_prompts()
    watch = Watch(SimulatedCost(workload_model(), clock, *cost), prompts, clock=clock)
    engine = Engine(watch, None, EngineConfig(**config), clock=clock)
    pending = sorted(requests, key=lambda r: r[0])
    ids, names, events = {}, {}, []
    out = {name: {"arrival": at, "tokens": [], "finish": None, "ended_at": None, "aborted": False}
           for at, name, _, _ in requests}
    to_abort = sorted((t, name) for name, t in aborts.items())
    for _ in range(max_steps):
        while pending and pending[0][0] <= clock():
            _, name, _, max_tokens = pending.pop(0)
            rid = engine.add_request(list(prompts[name]), RequestParams(temperature=0, max_tokens=max_tokens))
            ids[name], names[rid] = rid, name
        while to_abort and to_abort[0][0] <= clock():
            _, name = to_abort.pop(0)
            if name in ids and out[name]["finish"] is None:
                engine.abort(ids[name])
                out[name]["aborted"] = True
                events.append(["abort", len(watch.log), name])
        if not pending and not engine.has_unfinished():
            break
        n_forwards = len(watch.log)
        for o in engine.step():
            r = out.get(names.get(o.request_id))
            if r is None or r["finish"] is not None or r["aborted"]:
                continue
            r["tokens"] += [int(t) for t in o.new_token_ids]
            if o.finish_reason is not None:
                r["finish"], r["ended_at"] = str(o.finish_reason), len(watch.log)
        if len(watch.log) == n_forwards and pending:
            skip = pending[0][0] - clock()                 # nothing ran: time passes to the next arrival
            clock.advance(skip)
            events.append(["idle", len(watch.log), skip])
    return {"log": watch.log, "times": watch.times, "events": events, "requests": out,
            "unfinished": engine.has_unfinished(), "clock": clock()}
