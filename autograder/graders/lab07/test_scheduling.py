"""schedule (FCFS admission, preemption, liveness, batching that pays): the hidden cases of the
cell scheduling_is_fcfs_and_preempts_the_newest."""
from __future__ import annotations

import pytest

from autograder.checks import one_thread
from autograder.core import Fail, describe, is_raised

from .judging import case, data, expected, overtakes, per_request, pool_full_at_end, rows_per_step, same_requests
from .probes import PROMPTS, STREAM_END, TRACES

pytestmark = pytest.mark.cell("scheduling_is_fcfs_and_preempts_the_newest",
                              description="FCFS admission within the block budget, preemption by recompute, "
                                          "batching that pays")


@pytest.mark.probe("trace", "fcfs")
@pytest.mark.cell(points=2, visible=True)
def test_fcfs_head_is_not_skipped(observation):
    """A smaller request behind a head that does not fit yet waits for it."""
    with one_thread():
        obs = data(observation)
        first = {}
        for i, call in enumerate(obs["log"]):
            for row in call:
                first.setdefault(row[0], i)
        if "big" not in first or ("p8" in first and first["p8"] < first["big"]):
            raise Fail("a later, smaller request ran before the oldest waiting one", expected="big before p8",
                       got={k: first.get(k) for k in ("big", "p8")},
                       hint="Admit strictly in arrival order: when the head of the queue does not fit, stop "
                            "admitting (skipping it for smaller ones can starve it forever).")
        same_requests(obs, "fcfs")


@pytest.mark.probe("trace", "stream")
@pytest.mark.cell(points=2)
def test_no_request_waits_forever(observation):
    """A big request ends while a stream of small ones keeps arriving behind it."""
    with one_thread():
        r = per_request(data(observation)).get("big")
        if r is None or r["finish"] != "length" or r["finished_at"] >= STREAM_END:
            raise Fail("the big request was still not done when the stream of small requests behind it ended",
                       expected=f"finished before step {STREAM_END}", got=None if r is None else r["finished_at"],
                       hint="FCFS: the oldest waiting request goes first; requests behind it wait for it, even "
                            "when they would fit and it does not yet.")


@pytest.mark.probe("trace", "budget")
@pytest.mark.cell(points=2)
def test_admission_respects_the_block_budget(observation):
    """More requests than the pool holds: the reference's tokens, and the pool full at the end."""
    with one_thread():
        same_requests(observation, "budget", ("tokens", "finish"), "Admit a request only when the blocks for its "
                      "tokens are free (keeping the watermark), and reserve the running requests' blocks before "
                      "the forward.")
        pool_full_at_end(observation)


@pytest.mark.probe("trace", "preempt")
@pytest.mark.cell(points=2)
def test_preempted_requests_keep_their_tokens(observation):
    """A request is preempted and recomputed, and still gets the tokens it gets alone."""
    with one_thread():
        obs = data(observation)
        recomputed = [row for call in obs["log"] for row in call if row[1] == 0 and row[2] > len(PROMPTS[row[0]])]
        if not recomputed:
            raise Fail("no request was preempted and recomputed, although the pool cannot hold all three to the "
                       "end", hint="When the running requests need more blocks than are free, preempt the newest: "
                                   "release its cache and put it back at the head of the queue.")
        same_requests(obs, "preempt", ("tokens", "finish"), "A preempted request keeps its generated tokens; when it "
                      "runs again it feeds prompt + generated tokens into a new cache.")
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "preempt")
def test_preempts_the_newest(observation):
    """The first request preempted is the newest running one."""
    with one_thread():
        obs = data(observation)
        order = ["p3", "p6", "p7"]                       # arrival order
        rows = [[row[0] for row in step] for step in rows_per_step(obs)]
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
        raise Fail("no request was preempted",
                   hint="Preempt when the running requests need more blocks than are free.")


@pytest.mark.parametrize("trace", [
    case("a_bypass_passes_nobody_too_often", "bypass", probe=("trace", "bypass"), points=2),
    case("a_priority_passes_nobody_too_often", "priority", probe=("trace", "priority"), points=2),
])
def test_overtakes_within_the_bound(observation, trace):
    """Whatever the admission policy (FCFS, a bypass by size, a priority order), no waiting request
    is passed by more than config.max_overtakes later arrivals, and every request still gets the
    tokens it gets alone."""
    with one_thread():
        obs = data(observation)
        bound = TRACES[trace]["config"]["max_overtakes"]
        over = {n: k for n, k in overtakes(obs, trace).items() if k > bound}
        if over:
            raise Fail(f"with max_overtakes={bound}, request(s) {sorted(over)} were passed by more later "
                       "arrivals than that while they waited", expected=f"<= {bound} each", got=over,
                       hint="Count, for every waiting request, how many requests that arrived after it (a "
                            "larger req.seq) you admit while it waits, including a preempted one coming back; "
                            "admit a request only if every older waiting request has been passed fewer than "
                            "max_overtakes times. With 0, that is first come, first served.")
        same_requests(obs, trace)
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "watermark")
def test_watermark_kept_at_admission(observation):
    """No step that admits a request leaves fewer free blocks than the watermark."""
    with one_thread():
        obs = data(observation)
        wm = TRACES["watermark"]["config"]["watermark_blocks"]
        for i, (step, rows) in enumerate(zip(obs["steps"], rows_per_step(obs))):
            new = sorted(r[0] for r in rows if r[1] == 0 and r[2] == len(PROMPTS.get(r[0], [])))
            if new and step["free"] < wm:
                raise Fail(f"step {i} admitted {new} and left {step['free']} free block(s), under the watermark",
                           expected=f">= {wm}", got=step["free"],
                           hint="Admit only while num_free - blocks(prompt) >= watermark_blocks.")
        same_requests(obs, "watermark")


def same_batches(obs, trace, hint):
    """Each step's forward holds the requests the reference engine's does (as a set of names)."""
    got = [sorted({r[0] for r in rows}) for rows in rows_per_step(obs)]
    want = [sorted({r[0] for r in rows}) for rows in rows_per_step(expected(trace))]
    for i, w in enumerate(want):
        g = got[i] if i < len(got) else []
        if g != w:
            raise Fail(f"step {i} ran {g}, the reference engine runs {w}", expected=w, got=g, hint=hint)


WATERMARK_WAITS_HINT = ("While a request runs, keep watermark_blocks free: admit the head only if num_free - "
                        "blocks_needed(len(head.ids), block_size) >= watermark_blocks, even when its blocks "
                        "alone would fit.")
PREEMPTED_FIRST_HINT = ("Put a preempted request back at the FRONT of engine.waiting (appendleft): it is older "
                        "than every request still waiting, so it is admitted before them.")


@pytest.mark.probe("trace", "watermark_waits")
def test_watermark_waits_while_others_run(observation):
    """While p3 runs holding 2 of 4 blocks, p7 (1 block) waits for watermark 2 and runs after p3 ends."""
    with one_thread():
        obs = data(observation)
        same_batches(obs, "watermark_waits", WATERMARK_WAITS_HINT)
        same_requests(obs, "watermark_waits", hint=WATERMARK_WAITS_HINT)
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "preempt_front")
def test_preempted_request_goes_first(observation):
    """A preempted request goes back to the front of the queue: it runs again before a request
    that was waiting before it was preempted."""
    with one_thread():
        obs = data(observation)
        same_batches(obs, "preempt_front", PREEMPTED_FIRST_HINT)
        same_requests(obs, "preempt_front", hint=PREEMPTED_FIRST_HINT)
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "livelock")
@pytest.mark.cell(points=2)
def test_every_admissible_request_finishes(observation):
    """Liveness, under a step cap: every request that fits the pool alone ends, even one preempted
    back to a size that leaves no room for the watermark."""
    with one_thread():
        obs = data(observation)
        got = per_request(obs)
        livelock = TRACES["livelock"]
        stuck = sorted(n for _, n, _ in livelock["arrivals"] if got.get(n, {}).get("finish") is None)
        if stuck:
            raise Fail(f"request(s) {stuck} had not ended after {livelock['max_steps']} steps, although each fits "
                       "the pool alone (every step with a running request must give the oldest one a token)",
                       expected="every request ended",
                       got={"unfinished": stuck, "free blocks at the end": obs["free_end"]},
                       hint="With nothing running, the watermark protects nobody: admit the head if its tokens fit "
                            "at all. Otherwise a preempted request that came back bigger than num_blocks - "
                            "watermark_blocks waits forever on an empty pool.")
        same_requests(obs, "livelock")
        pool_full_at_end(obs)


@pytest.mark.probe("trace", "whole_pool")
def test_a_request_that_fills_the_pool_runs(observation):
    """A prompt whose tokens fill every block of the pool is admitted when nothing runs: it leaves
    0 free blocks, which is at least the 0 kept back with nothing running."""
    with one_thread():
        obs = data(observation)
        if per_request(obs).get("big", {}).get("finish") is None:
            raise Fail("a 10-token prompt on an empty pool of 5 blocks of 2 (max_tokens 1) never ran",
                       expected="admitted at the first step", got={"free blocks at the end": obs["free_end"]},
                       hint="Admit the head while blocks_needed(len(head.ids)) leaves AT LEAST the blocks kept "
                            "back free (num_free - needed >= kept back, not >), and with nothing running keep "
                            "back nothing.")
        same_requests(obs, "whole_pool", names=["big"])
        pool_full_at_end(obs)


@pytest.mark.probe("throughput")
@pytest.mark.cell(points=2)
def test_throughput_on_the_cost_model(observation):
    """Eight requests in one batch are at least 4x faster than one at a time on the cost model."""
    with one_thread():
        if is_raised(observation):
            raise Fail(f"the throughput trace could not run: {observation['__raised__']}: "
                       f"{observation['message']}")
        if not isinstance(observation, dict) or set(observation) != {"batched", "sequential"}:
            raise Fail("the probe returned an unexpected observation", got=describe(observation))
        rates = {}
        for k in ("batched", "sequential"):
            d = data(observation[k])
            if not isinstance(d["clock"], (int, float)) or isinstance(d["clock"], bool) or d["clock"] <= 0:
                raise Fail("the probe returned an unexpected observation", got=describe(d["clock"]))
            tokens = sum(len(r["tokens"]) for r in per_request(d).values())
            if tokens != 8 * 16:
                raise Fail(f"the {k} run produced {tokens} tokens", expected=128, got=tokens)
            rates[k] = tokens / d["clock"]
        if rates["batched"] < 4 * rates["sequential"]:
            raise Fail("8 concurrent requests are not 4x faster than one at a time on the cost model "
                       "(step cost = 1 + 0.05 * tokens fed)", expected=f">= {4 * rates['sequential']:.3f} tokens/s",
                       got=round(rates["batched"], 3), hint="One forward per step for ALL running requests: the "
                                                            "fixed cost is paid once per step, not once per request.")
