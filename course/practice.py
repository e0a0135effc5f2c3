"""Lab 07's practice workload and its figures: measure an engine the way the graded
performance workload does, as often as you like, before you change anything and after.

    from course.practice import practice_workload, measure
    work = practice_workload(vocab_size=model.vocab_size)
    measure(Engine, model, work)   # {"makespan", "ttft_mean", "ttft_p95", "tpot_p95"}, seconds

Each request arrives at a given time of a FakeClock and runs greedily to max_tokens
(ignore_eos) on the model you pass, wrapped in SimulatedCost: a forward costs
a + b * tokens fed + c * tokens already cached. The clock moves only by those costs (and,
when nothing runs, to the next arrival), so the figures are exact and the same on every
machine. A token's time is the clock after the step that returned it; TTFT counts from the
request's arrival, TPOT is (last token - first token) / (tokens - 1), the makespan runs
from the first arrival to the last token, and percentiles are Lab 06's type 6.

The workload is not the graded one (that stays with the grader) but has its shape: bursts
of arrivals, mostly short answers and a few long ones, a pool that makes requests wait.
`shared_prefix=n` starts every prompt with the same n tokens (a system prompt), the case
prefix caching is for.
"""
from __future__ import annotations

from ._checks import check_int, check_type
from .batched import EngineConfig, RequestParams, SimulatedCost, as_batched
from .clock import FakeClock

FIGURES = ("makespan", "ttft_mean", "ttft_p95", "tpot_p95")


def practice_workload(n_requests: int = 24, *, shared_prefix: int = 0, vocab_size: int = 256) -> dict:
    """A workload: {"requests": [(arrival s, prompt ids, max_tokens)], "config": EngineConfig
    fields, "cost": (a, b, c)}. Prompts of 2-30 tokens and answers of 2-24 tokens, in bursts
    of six every 0.12 s; ids are spread over [1, vocab_size) with no randomness involved."""
    check_int("n_requests", n_requests, 1, 256)
    check_int("shared_prefix", shared_prefix, 0, 256)
    check_int("vocab_size", vocab_size, 8)
    prefix = [1 + (11 * k) % (vocab_size - 1) for k in range(shared_prefix)]
    requests = []
    for i in range(n_requests):
        length = 2 + (7 * i + 3) % 29                  # 2 .. 30 prompt tokens of its own
        answer = 24 if i % 5 == 2 else 2 + (5 * i) % 9  # mostly short, every fifth one long
        own = [1 + (31 * i + 17 * k + 5) % (vocab_size - 1) for k in range(length)]
        requests.append((round(0.12 * (i // 6), 6), prefix + own, answer))
    return {"requests": requests,
            "config": {"num_blocks": 48 + shared_prefix // 2, "block_size": 4, "max_batch": 8,
                       "watermark_blocks": 1, "max_overtakes": 4},
            "cost": (0.020, 0.0004, 0.00002)}


def run(Engine, model, workload: dict, tokenizer=None, max_steps: int = 5000) -> dict:
    """Step Engine(model on the cost model, tokenizer, config, clock=FakeClock) through the
    workload; return {"requests": [{"arrival", "tokens", "times"}], "clock"}: each request's
    tokens and the clock after the step that returned each one."""
    check_type("workload", workload, dict, "a dict from practice_workload")
    clock = FakeClock()
    a, b, c = workload["cost"]
    costed = SimulatedCost(as_batched(model), clock, a, b, c)
    engine = Engine(costed, tokenizer, EngineConfig(**workload["config"]), clock=clock)
    pending = sorted(enumerate(workload["requests"]), key=lambda r: (r[1][0], r[0]))
    out = [{"arrival": at, "tokens": [], "times": []} for at, _, _ in workload["requests"]]
    index = {}
    for _ in range(max_steps):
        while pending and pending[0][1][0] <= clock():
            i, (_, prompt, max_tokens) = pending.pop(0)
            params = RequestParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
            index[engine.add_request(list(prompt), params)] = i
        if not pending and not engine.has_unfinished():
            break
        calls = len(costed.tokens_per_call)
        for o in engine.step():
            r = out[index[o.request_id]]
            r["tokens"] += [int(t) for t in o.new_token_ids]
            r["times"] += [clock()] * len(o.new_token_ids)
        if len(costed.tokens_per_call) == calls and pending:
            clock.advance(max(0.0, pending[0][1][0] - clock()))     # nothing ran: wait for the next arrival
    else:
        raise RuntimeError(f"the engine had not finished the workload after {max_steps} steps.")
    return {"requests": out, "clock": clock()}


def figures(result: dict) -> dict:
    """{"makespan", "ttft_mean", "ttft_p95", "tpot_p95"} of run()'s result, in seconds."""
    from .tracing import percentile
    reqs = result["requests"]
    ttft = [r["times"][0] - r["arrival"] for r in reqs if r["times"]]
    tpot = [(r["times"][-1] - r["times"][0]) / (len(r["times"]) - 1) for r in reqs if len(r["times"]) > 1]
    if not ttft:
        raise ValueError("`result` holds no token: the engine returned nothing for any request.")
    end = max(r["times"][-1] for r in reqs if r["times"])
    return {"makespan": round(end - min(r["arrival"] for r in reqs), 9),
            "ttft_mean": round(sum(ttft) / len(ttft), 9),
            "ttft_p95": round(percentile(ttft, 95), 9),
            "tpot_p95": round(percentile(tpot, 95), 9) if tpot else 0.0}


def measure(Engine, model, workload: dict | None = None, tokenizer=None) -> dict:
    """figures(run(...)) of Engine on `workload` (practice_workload() for the model's vocabulary
    when None), after checking that every request got its max_tokens."""
    model = as_batched(model)
    workload = workload if workload is not None else practice_workload(vocab_size=model.vocab_size)
    result = run(Engine, model, workload, tokenizer)
    short = [i for i, (r, (_, _, m)) in enumerate(zip(result["requests"], workload["requests"]))
             if len(r["tokens"]) != m]
    if short:
        raise ValueError(f"request(s) {short[:5]} did not get their max_tokens: the engine lost or "
                         "added tokens, so its figures would mean nothing.")
    return figures(result)
