"""The performance grade's judge (grading process only: it uses the reference): one fixed
WORKLOAD (32 requests in four bursts over 0.5 s of the grader's FakeClock, three aborted, a
pool that makes requests wait and preempts one) on the cost model a + b * tokens fed + c *
tokens cached.

The probe (workload) returns the Watch's log of every forward pass and the clock after each;
`figures` replays that log through the cost model itself, so every time is the grader's:
arrival (fixed by the workload), each token (the end of the first forward whose row for the
request reached that token), the end (its last token, or its abort). From them: makespan
(first arrival to last end), mean and P95 TTFT (finished requests), P95 TPOT (finished
requests with two tokens or more); percentiles are Lab 06's type 6. The same workload on the
reference engine gives the yardstick (test_performance.py holds the cases and their margins).
"""
from __future__ import annotations

import copy
import math
from functools import lru_cache

from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised
from autograder.reference import lab07 as ref

from .probes import EOS, WORKLOAD, run_workload, workload_model, workload_prompts

FIGURES = ("makespan", "ttft_mean", "ttft_p95", "tpot_p95")
MAKESPAN_MARGIN = 1.10     # the points: makespan at most 10% longer than the reference engine's,
TTFT_MARGIN = 1.25         # and P95 TTFT at most 25% longer
KEYS = ("log", "times", "events", "requests", "unfinished", "clock")
REQUEST_KEYS = ("arrival", "tokens", "finish", "ended_at", "aborted")


@lru_cache(maxsize=1)
def reference_run() -> dict:
    """The reference engine through the workload (read it, never change it)."""
    with one_thread():
        return run_workload(ref.Engine, **copy.deepcopy(WORKLOAD))


@lru_cache(maxsize=1)
def solo_runs() -> dict:
    """{name: (tokens, finish reason)} of each request alone: the greedy run of its script."""
    model, out = workload_model(), {}
    for (_, name, _, max_tokens), prompt in zip(WORKLOAD["requests"], workload_prompts().values()):
        tokens, _ = ref.solo_greedy(model, prompt, max_tokens, EOS)
        out[name] = (tokens, "stop" if tokens[-1] == EOS else "length")
    return out


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _shaped(obs) -> bool:
    if not isinstance(obs, dict) or any(k not in obs for k in KEYS):
        return False
    if not (isinstance(obs["log"], list) and isinstance(obs["times"], list) and isinstance(obs["events"], list)
            and isinstance(obs["requests"], dict) and set(obs["requests"]) == {n for _, n, _, _ in WORKLOAD["requests"]}):
        return False
    if len(obs["times"]) != len(obs["log"]) or not all(_number(t) for t in obs["times"]):
        return False
    if not all(isinstance(call, list) and all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)
                                              and type(r[1]) is int and type(r[2]) is int for r in call)
               for call in obs["log"]):
        return False
    for e in obs["events"]:
        if not (isinstance(e, list) and len(e) == 3 and e[0] in ("idle", "abort") and type(e[1]) is int
                and (_number(e[2]) if e[0] == "idle" else isinstance(e[2], str))):
            return False
    return all(isinstance(r, dict) and all(k in r for k in REQUEST_KEYS) and isinstance(r["tokens"], list)
               for r in obs["requests"].values())


def _cost(call) -> float:
    """Seconds one logged forward costs on the cost model (SimulatedCost's arithmetic)."""
    a, b, c = WORKLOAD["cost"]
    return a + b * sum(r[2] for r in call) + c * sum(r[1] for r in call)


def _blocks(call) -> int:
    """Blocks the rows of one logged forward hold once it has run (every row's cached + new tokens)."""
    return sum(-(-(cached + new) // WORKLOAD["config"]["block_size"]) for _, cached, new in call)


def _clock(obs) -> tuple[list[float], dict]:
    """The time after each forward and the time of each abort, replayed from the log through
    the cost model (the same arithmetic as SimulatedCost and FakeClock)."""
    events = sorted(enumerate(obs["events"]), key=lambda e: (e[1][1], e[0]))
    t, times, aborts, k = 0.0, [], {}, 0
    for i, call in enumerate(obs["log"]):
        while k < len(events) and events[k][1][1] <= i:
            t = _event(events[k][1], t, aborts)
            k += 1
        t += _cost(call)
        times.append(t)
    for _, e in events[k:]:
        t = _event(e, t, aborts)
    return times, aborts


def _event(event, t: float, aborts: dict) -> float:
    """Apply one of run_workload's events to the replayed clock: time skipped while nothing ran
    (forward only, and only up to an arrival), or an abort (of a request the workload aborts,
    not before its time)."""
    kind, _, what = event
    if kind == "idle":
        arrivals = {at for at, _, _, _ in WORKLOAD["requests"]}
        if what < 0 or not any(abs(t + what - at) <= 1e-9 for at in arrivals):
            raise ImpossibleLog(f"it skips time to a moment that is no arrival ({describe(event)})")
        return t + float(what)
    when = WORKLOAD["aborts"].get(what)
    if when is None or t < when - 1e-9 or what in aborts:
        raise ImpossibleLog(f"it holds an abort the workload does not make ({describe(event)})")
    aborts[what] = t
    return t


class ImpossibleLog(Fail):
    """The workload's log describes forward passes that no engine could have run on the model and
    pool it was given: the log was not the model's. The performance cases fail, the submission is
    flagged for review, and it gets no figures (so no leaderboard rank)."""

    def __init__(self, what: str):
        super().__init__(f"the performance workload's log is impossible: {what}",
                         hint="Run the workload with the model, clock and pool you are given: the grader times "
                              "the forward passes they saw, and a log they could not have produced scores nothing.")


def passes_are_possible(obs, rows: dict, times: list[float]) -> None:
    """Raise ImpossibleLog unless every request's rows ([(forward index, cached, new)], in order)
    are what the batched model can do: the k-th forward a request is in feeds its prompt and the
    k tokens before (cached + new == prompt length + k, new >= 1) and gives it token k; the cache
    it finds holds what it was fed before, or nothing after a preemption (cached == 0); its first
    forward starts no earlier than its arrival; and the blocks the requests hold between their
    forwards (a request keeps its cache until its next forward finds it, lost or kept) never
    exceed the pool."""
    prompts, cfg = workload_prompts(), WORKLOAD["config"]
    arrival = {name: at for at, name, _, _ in WORKLOAD["requests"]}
    unknown = sorted(set(rows) - set(arrival))
    if unknown:
        raise ImpossibleLog(f"forward pass {rows[unknown[0]][0][0]} holds {unknown[0]!r}, a request the workload "
                            f"never sent")
    held = [0] * len(obs["log"])       # blocks of the caches kept between a request's forwards, per forward
    for name, mine in rows.items():
        fed = 0
        for k, (i, cached, new) in enumerate(mine):
            if new < 1 or cached + new != len(prompts[name]) + k:
                raise ImpossibleLog(f"forward pass {i} fed request {name!r} {new} token(s) on top of {cached} "
                                    f"cached, but its forward number {k + 1} can feed only its prompt and the {k} "
                                    f"token(s) before: {len(prompts[name]) + k} in all, one new token a forward")
            if cached not in (0, fed):
                raise ImpossibleLog(f"forward pass {i} found {cached} tokens of request {name!r} in its cache, "
                                    f"which held {fed} (or none, after a preemption)")
            fed = cached + new
            if k + 1 < len(mine) and mine[k + 1][1] > 0:           # the next forward finds this cache
                for j in range(i + 1, mine[k + 1][0]):
                    held[j] += -(-fed // cfg["block_size"])
        first = mine[0][0]
        start = times[first] - _cost(obs["log"][first])
        if start < arrival[name] - 1e-9:
            raise ImpossibleLog(f"forward pass {first} started at {start:.4f} s and fed request {name!r}, which "
                                f"arrives at {arrival[name]} s")
    for i, call in enumerate(obs["log"]):
        blocks = held[i] + _blocks(call)
        if blocks > cfg["num_blocks"]:
            raise ImpossibleLog(f"during forward pass {i} the requests held {blocks} blocks, more than the pool's "
                                f"{cfg['num_blocks']}")


def figures(obs) -> dict:
    """{"makespan", "ttft_mean", "ttft_p95", "tpot_p95"} of a workload run, in seconds of the
    grader's clock; a Fail when the run cannot be judged (the engine raised, a request's tokens
    differ from its solo run, a token came out of no logged forward, the clock disagrees)."""
    from course.tracing import percentile
    if is_raised(obs):
        raise Fail(f"the performance workload could not run: your engine raised {obs['__raised__']}: "
                   f"{obs['message']}", got=describe(obs))
    if not _shaped(obs):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    times, abort_at = _clock(obs)
    if any(abs(x - y) > 1e-9 * max(1.0, abs(y)) for x, y in zip(obs["times"], times)):
        raise ImpossibleLog("the clock does not match the cost of the forward passes it logged (time advances "
                            "only by the cost of each forward pass)")
    if obs["unfinished"]:
        raise Fail("has_unfinished() is still True after the workload ended")
    solo, cfg = solo_runs(), WORKLOAD["config"]
    rows = {}
    for i, call in enumerate(obs["log"]):
        names = [name for name, _, _ in call]
        if len(set(names)) < len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ImpossibleLog(f"forward pass {i} holds request {twice!r} twice")
        blocks = _blocks(call)
        if len(call) > cfg["max_batch"] or blocks > cfg["num_blocks"]:
            raise Fail(f"on the performance workload, forward pass {i} held {len(call)} requests and {blocks} "
                       f"blocks of tokens, more than max_batch={cfg['max_batch']} or the pool's "
                       f"{cfg['num_blocks']} blocks", hint="Speed counts only within the engine's configuration: "
                                                           "at most max_batch requests, never more blocks than the pool.")
        for name, cached, new in call:
            rows.setdefault(name, []).append((i, cached, new))
    passes_are_possible(obs, rows, times)
    ttft, tpot, ends = [], [], []
    for at, name, _, _ in WORKLOAD["requests"]:
        r, (want, finish) = obs["requests"][name], solo[name]
        got = r["tokens"]
        if r["aborted"] is not (name in abort_at):
            raise Fail(f"request {name!r}: the workload's log and its outputs disagree on whether it was aborted",
                       got=describe(r))
        if r["aborted"]:
            if got != want[:len(got)]:
                raise Fail(f"request {name!r} (aborted later): its tokens differ from its solo run",
                           expected=want[:len(got)], got=got, hint="Batching may change when a token is "
                                                                   "computed, never which token.")
        elif got != want or r["finish"] != finish:
            raise Fail(f"request {name!r}: tokens or finish reason differ from its solo run",
                       expected={"tokens": want, "finish": finish}, got={"tokens": got, "finish": r["finish"]},
                       hint="Batching may change when a token is computed, never which token.")
        token_at = {k: times[i] for k, (i, _, _) in enumerate(rows.get(name, []))}   # row k made token k
        missing = [j for j in range(len(got)) if j not in token_at]
        if missing:
            raise Fail(f"request {name!r}: token {missing[0]} came out of no logged forward pass",
                       hint="Feed every token through the model you are given.")
        stamps = [token_at[j] for j in range(len(got))]
        if r["aborted"]:
            ends.append(abort_at.get(name, obs["clock"]))
            continue
        ends.append(stamps[-1])
        if stamps[0] <= at:
            raise Fail(f"request {name!r}: its first token came out of a forward pass that ended before it arrived",
                       got=describe(rows.get(name)))
        ttft.append(stamps[0] - at)
        if len(stamps) > 1:
            tpot.append((stamps[-1] - stamps[0]) / (len(stamps) - 1))
    first = min(at for at, _, _, _ in WORKLOAD["requests"])
    return {"makespan": round(max(ends) - first, 9), "ttft_mean": round(sum(ttft) / len(ttft), 9),
            "ttft_p95": round(percentile(ttft, 95), 9), "tpot_p95": round(percentile(tpot, 95), 9)}


@lru_cache(maxsize=1)
def reference_figures() -> dict:
    return figures(reference_run())
