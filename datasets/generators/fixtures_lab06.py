"""Lab 06 request sets: scripted requests on a simulated clock, and the event log a
server would write for them.

Each set is a list of requests (arrival, prompt and output lengths, sampling
parameters, how it ends) run through one small server model:

  * `slots` requests run at once; a request also needs KV blocks for its prompt plus
    max_tokens (ceil(tokens / block_size)) out of `kv_capacity`. Requests are admitted
    first come, first served, when a slot and the blocks are free: that wait is the queue.
  * prefill takes prefill_fixed_s + prefill_per_token_s * input_tokens; the first token is
    chosen at its end; each further token takes decode_per_token_s (times a small factor
    for the requests running alongside it when it was admitted).
  * a finished request is parsed (parse_s) and, when its output is complete (finish
    reason stop), its side effect runs (side_effect_s). Slot and blocks are freed when
    decoding ends.
  * scripted endings: "length" at max_tokens, a client cancel at a given time, a
    timeout at a deadline, an error after k tokens.

Every time is rounded to the microsecond, so spans built from the log are exact. The
first-deviation incident sets each change one thing in the baseline, one row of the
course's troubleshooting table each; the noise set only jitters it within a few percent.
"""
from __future__ import annotations

import json
import math
import random

SCHEMA = "request_set/1"
MODEL = "tiny-model"
TOKENIZER = "tiny-model-bpe-512"

BASE_COSTS = {"prefill_fixed_s": 0.01, "prefill_per_token_s": 0.0005, "decode_per_token_s": 0.02,
              "batch_slowdown": 0.05, "parse_s": 0.004, "side_effect_s": 0.03,
              "slots": 16, "kv_capacity": 512, "block_size": 16}


def _r(t: float) -> float:
    return round(t, 6)


def _request(i, arrival, input_tokens, output_tokens, *, max_tokens=64, temperature=0.7, top_p=0.95,
             cancel_at=None, deadline=None, error_after=None, correct=True, hit_tokens=0):
    return {"request_id": f"r{i:02d}", "arrival": _r(arrival), "input_tokens": input_tokens,
            "output_tokens": output_tokens, "max_tokens": max_tokens, "temperature": temperature,
            "top_p": top_p, "cancel_at": cancel_at, "deadline": deadline, "error_after": error_after,
            "correct": correct, "hit_tokens": hit_tokens}


def _blocks(req, block_size):
    return math.ceil((req["input_tokens"] + req["max_tokens"]) / block_size)


def simulate(requests, costs):
    """(timelines, counters, events) for `requests` under `costs`."""
    slots, capacity, bs = costs["slots"], costs["kv_capacity"], costs["block_size"]
    running: list[tuple[float, float, int]] = []     # (admitted, released, blocks)
    timelines, last_admit = [], 0.0
    for req in sorted(requests, key=lambda r: (r["arrival"], r["request_id"])):
        need = _blocks(req, bs)
        if need > capacity:
            raise ValueError(f"{req['request_id']} needs {need} blocks, more than the pool")
        arrival = req["arrival"]
        t0 = max(arrival, last_admit)
        candidates = sorted({t0} | {rel for _, rel, _ in running if rel > t0})

        def fits(t):
            live = [(a, rel, b) for a, rel, b in running if a <= t < rel]
            return len(live) < slots and sum(b for _, _, b in live) + need <= capacity

        admit = next(t for t in candidates if fits(t))
        in_flight = 1 + sum(1 for tl in timelines if tl["arrival"] <= arrival < tl["end"])
        stop_at = min(x for x in (req["cancel_at"], req["deadline"], math.inf) if x is not None)
        cut_reason = None if stop_at == math.inf else ("cancelled" if stop_at == req["cancel_at"] else "timeout")
        tl = {"request_id": req["request_id"], "arrival": arrival, "stages": [], "tokens": [],
              "concurrency": in_flight, "blocks": need}

        def finish(t, reason):
            tl["end"], tl["finish_reason"] = _r(t), reason
            return tl

        def cut(t):
            if tl["stages"]:
                tl["stages"][-1][2] = _r(t)
            return finish(t, cut_reason)

        tl["stages"].append(["queue", arrival, _r(admit)])
        if stop_at <= admit:                                 # gave up while queued
            tl["stages"][-1][2] = _r(stop_at)
            finish(stop_at, cut_reason)
            tl["released"] = None
            timelines.append(tl)
            continue
        last_admit = admit
        batch = 1 + sum(1 for a, rel, _ in running if a <= admit < rel)
        prefill_end = _r(admit + costs["prefill_fixed_s"] + costs["prefill_per_token_s"] * req["input_tokens"])
        step = costs["decode_per_token_s"] * (1 + costs["batch_slowdown"] * (batch - 1))
        n_out = min(req["output_tokens"], req["max_tokens"])
        reason = "stop" if req["output_tokens"] <= req["max_tokens"] else "length"
        if req["error_after"] is not None:
            n_out, reason = req["error_after"], "error"
        tl["stages"].append(["prefill", _r(admit), prefill_end])
        token_times = [_r(prefill_end + k * step) for k in range(n_out)] if n_out else []
        if reason == "error":
            error_at = _r(prefill_end + n_out * step) if n_out else prefill_end
        decode_end = token_times[-1] if token_times else prefill_end
        if reason == "error":
            decode_end = error_at
        if stop_at < decode_end or (stop_at == decode_end and reason == "error"):
            # cut off during prefill or decode: tokens chosen before the cut survive
            tl["tokens"] = [t for t in token_times if t <= stop_at]
            if stop_at > prefill_end:
                tl["stages"].append(["decode", prefill_end, _r(stop_at)])
            release = stop_at
            cut(stop_at)
        else:
            tl["tokens"] = token_times
            if n_out > 1 or reason == "error" and n_out >= 1:
                tl["stages"].append(["decode", prefill_end, decode_end])
            release = decode_end
            if reason == "error":
                finish(error_at, "error")
            else:
                t = decode_end
                tl["stages"].append(["parse", t, _r(t + costs["parse_s"])])
                t = _r(t + costs["parse_s"])
                if reason == "stop":
                    tl["stages"].append(["side_effect", t, _r(t + costs["side_effect_s"])])
                    t = _r(t + costs["side_effect_s"])
                finish(t, reason)
        running.append((admit, release, need))
        tl["released"] = release
        timelines.append(tl)
    counters = _counters(running)
    for tl in timelines:
        tl["kv_blocks_peak"] = max([c["value"] for c in counters if c["name"] == "kv_blocks_in_use"
                                    and tl["arrival"] <= c["time"] <= tl["end"]] + [_in_use(running, tl["arrival"])])
    return timelines, counters


def _in_use(running, t):
    return sum(b for a, rel, b in running if a <= t < rel)


def _counters(running):
    times = sorted({a for a, _, _ in running} | {rel for _, rel, _ in running})
    out = []
    for t in times:
        out.append({"name": "batch_size", "time": _r(t), "value": sum(1 for a, rel, _ in running if a <= t < rel)})
        out.append({"name": "kv_blocks_in_use", "time": _r(t), "value": _in_use(running, t)})
    return out


def event_log(requests, timelines, counters):
    by_id = {r["request_id"]: r for r in requests}
    events = []
    for tl in timelines:
        req, rid = by_id[tl["request_id"]], tl["request_id"]
        events.append({"time": tl["arrival"], "event": "arrive", "request_id": rid, "attributes": {
            "gen_ai.request.model": MODEL, "gen_ai.request.temperature": req["temperature"],
            "gen_ai.request.top_p": req["top_p"], "gen_ai.request.max_tokens": req["max_tokens"],
            "gen_ai.usage.input_tokens": req["input_tokens"], "course.concurrency": tl["concurrency"]}})
        for name, start, _ in tl["stages"][1:]:
            events.append({"time": start, "event": "stage", "request_id": rid, "stage": name})
        for t in tl["tokens"]:
            events.append({"time": t, "event": "token", "request_id": rid})
        attrs = {"course.kv_cache_hit_tokens": req["hit_tokens"],
                 "course.kv_cache_released": tl["released"] is not None,
                 "course.output_correct": bool(req["correct"]) and tl["finish_reason"] == "stop"}
        if tl["finish_reason"] == "error":
            attrs["error.type"] = "ModelError"
        events.append({"time": tl["end"], "event": "end", "request_id": rid,
                       "finish_reason": tl["finish_reason"], "attributes": attrs})
    for c in counters:
        events.append({"time": c["time"], "event": "counter", "name": c["name"], "value": c["value"]})
    # time order; at equal times counters first, then request by request: arrive, the token
    # that ends prefill, the next stage, the end
    rank = {"counter": 0, "arrive": 1, "token": 2, "stage": 3, "end": 4}
    return sorted(events, key=lambda e: (e["time"], e.get("request_id", ""), rank[e["event"]]))


def request_set(name, description, exercises, requests, costs=None, **extra):
    costs = {**BASE_COSTS, **(costs or {})}
    timelines, counters = simulate(requests, costs)
    events = event_log(requests, timelines, counters)
    return {"name": name, "schema_version": SCHEMA, "description": description, "exercises": list(exercises),
            "model": MODEL, "tokenizer_version": TOKENIZER, "costs": costs, **extra,
            "requests": requests, "timelines": timelines, "events": events}


# ---------------------------------------------------------------- the sets

def _baseline_requests(seed=60, n=24, gap=0.1, **kw):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(_request(i, i * gap + rng.uniform(0, 0.02), rng.choice([32, 48, 64, 96, 128, 192]),
                            rng.randint(12, 28), **kw))
    return out


def _noisy(reqs, seed, scale):
    rng = random.Random(seed)
    return [{**r, "arrival": _r(r["arrival"] * (1 + rng.uniform(-scale, scale))),
             "output_tokens": max(1, r["output_tokens"] + rng.choice([-1, 0, 0, 1]))} for r in reqs]


def _jitter_costs(seed, scale):
    rng = random.Random(seed)
    c = dict(BASE_COSTS)
    for k in ("prefill_fixed_s", "prefill_per_token_s", "decode_per_token_s", "parse_s", "side_effect_s"):
        c[k] = round(c[k] * (1 + rng.uniform(-scale, scale)), 7)
    return c


def _with(reqs, every, **change):
    return [{**r, **change} if i % every == 0 else dict(r) for i, r in enumerate(reqs)]


def _mixed():
    """Varied lengths and bursts, and every way a request can end."""
    rng = random.Random(66)
    reqs, t = [], 0.0
    lengths = [16, 40, 100, 128, 129, 300, 512, 513, 900, 2000]
    for i in range(40):
        t += rng.choice([0.005, 0.01, 0.02, 0.2, 0.3]) if i % 10 else 0.5   # bursts
        out = rng.choice([1, 1, 3, 8, 20, 40, 64, 120])
        reqs.append(_request(i, t, rng.choice(lengths), out, max_tokens=128, temperature=rng.choice([0.0, 0.7, 1.0])))
    reqs[3] = {**reqs[3], "output_tokens": 200}                        # length
    reqs[7] = {**reqs[7], "cancel_at": _r(reqs[7]["arrival"] + 0.3), "output_tokens": 120}
    reqs[12] = {**reqs[12], "deadline": _r(reqs[12]["arrival"] + 0.05), "input_tokens": 2000}
    reqs[18] = {**reqs[18], "error_after": 4, "output_tokens": 40}
    reqs[25] = {**reqs[25], "error_after": 0, "output_tokens": 40}      # fails in prefill
    reqs[31] = {**reqs[31], "output_tokens": 1}
    return reqs


def _paths():
    """One request per way of ending, spread out so none waits for another."""
    mk = lambda i, **kw: _request(i, 0.5 * i, 64, 6, **{"max_tokens": 16, **kw})  # noqa: E731
    return [
        mk(0), mk(1, max_tokens=4), mk(2, cancel_at=1.02), mk(3, deadline=1.6),
        mk(4, error_after=2), mk(5, error_after=0), mk(6, cancel_at=3.05), {**mk(7), "output_tokens": 1},
        mk(8, hit_tokens=48),
    ]


def _queue_cancel():
    """Two slots, a burst of six: the last ones wait; one is cancelled while still queued."""
    reqs = [_request(i, 0.001 * i, 64, 10, max_tokens=16) for i in range(6)]
    reqs[5] = {**reqs[5], "cancel_at": 0.1}
    return reqs


BASE = _baseline_requests()
SETS = [
    request_set("trace_baseline", "24 healthy requests, ~10 per second, no queueing: the reference for the "
                "incident sets.", ["spans", "metrics", "first_deviation"], BASE),
    request_set("trace_noise_only", "The baseline with arrivals, costs and lengths jittered by a few percent: "
                "not a deviation.", ["first_deviation", "noise"], _noisy(BASE, 61, 0.03),
                costs=_jitter_costs(62, 0.05)),
    request_set("trace_queue_incident", "Slow first token, normal decode: two slots for the same traffic, so "
                "requests wait in the queue.", ["first_deviation", "queue"], BASE, costs={"slots": 2}),
    request_set("trace_prefill_incident", "Slow first token, normal decode: prefill is 8x slower per prompt "
                "token, no queueing.", ["first_deviation", "prefill"], BASE,
                costs={"prefill_per_token_s": 0.004}),
    request_set("trace_tpot_incident", "Normal TTFT, slow completion: every decode step takes 2.5x as long.",
                ["first_deviation", "tpot"], BASE, costs={"decode_per_token_s": 0.05}),
    request_set("trace_decode_rounds_incident", "Normal TTFT and TPOT, slow completion: answers are three "
                "times as long (more decode rounds).", ["first_deviation", "decode_rounds"],
                [{**r, "output_tokens": r["output_tokens"] * 3, "max_tokens": 128} for r in BASE]),
    request_set("trace_kv_cache_incident", "Concurrency rises (twice the traffic) and the KV pool fills up: "
                "requests queue for memory.", ["first_deviation", "kv_cache"],
                _baseline_requests(60, 48, 0.05), costs={"kv_capacity": 24}),
    request_set("trace_cut_off_incident", "JSON sometimes cut in half: max_tokens=16 on two requests in three, "
                "too small for many answers (finish reason length).", ["first_deviation", "finish_reason"],
                [{**r, "max_tokens": 16} if i % 3 else dict(r) for i, r in enumerate(BASE)]),
    request_set("trace_not_latency_incident", "Low temperature, still wrong: latency is normal, half the "
                "answers are wrong.", ["first_deviation", "not_latency"],
                [{**r, "temperature": 0.0, "correct": i % 2 == 1} for i, r in enumerate(BASE)]),
    request_set("trace_mixed", "40 requests with prompt lengths 16-2000, bursts, one-token answers, a length "
                "cut, a cancel, a timeout and two errors.", ["spans", "metrics", "percentiles", "grouping"],
                _mixed(), costs={"slots": 4}),
    request_set("trace_paths", "One request per ending: stop, length, cancel in prefill and in decode, "
                "timeout, error in decode and in prefill, one token, a prefix-cache hit.",
                ["spans", "cancel", "timeout", "error"], _paths()),
    request_set("trace_queue_cancel", "A burst of six on two slots: four wait, one is cancelled while "
                "still queued.", ["spans", "queue", "cancel"], _queue_cancel(), costs={"slots": 2}),
]

INCIDENTS = {
    "trace_queue_incident": "queue", "trace_prefill_incident": "prefill", "trace_tpot_incident": "tpot",
    "trace_decode_rounds_incident": "decode_rounds", "trace_kv_cache_incident": "kv_cache",
    "trace_cut_off_incident": "finish_reason", "trace_not_latency_incident": "not_latency",
    "trace_noise_only": None,
}


def dumps(rs: dict) -> str:
    """Stable text: header fields one per line, then one request / timeline / event per line."""
    lines = ["{"]
    lists = ("requests", "timelines", "events")
    head = [(k, v) for k, v in rs.items() if k not in lists]
    for k, v in head:
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)},")
    for j, key in enumerate(lists):
        items = rs[key]
        lines.append(f"  {json.dumps(key)}: [")
        lines.extend(f"    {json.dumps(x, sort_keys=True)}{',' if i < len(items) - 1 else ''}"
                     for i, x in enumerate(items))
        lines.append("  ]" + ("," if j < len(lists) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


EXTRA_FILES = {f"{rs['name']}.json": dumps(rs) for rs in SETS}

README_SECTION = """
## Request sets (lab06)

Scripted requests run through a small simulated server (`datasets/generators/fixtures_lab06.py`
says how), with the event log the server writes. Load them with `json.load`; they are not
logit fixtures (`schema_version` is "request_set/1", so `course.fixtures.load` refuses them).
Fields: `costs` (the server model), `requests` (the script), `timelines` (stage intervals,
token times and ending of each request, in seconds), `events` (time-ordered `arrive`, `stage`,
`token`, `end` and `counter` events).

| name | requests | events | exercises | description |
| --- | --- | --- | --- | --- |
""" + "\n".join(f"| `{rs['name']}` | {len(rs['requests'])} | {len(rs['events'])} | {', '.join(rs['exercises'])} | "
                f"{rs['description']} |" for rs in sorted(SETS, key=lambda r: r["name"])) + "\n"

FIXTURES: list = []   # no logit fixtures in this lab
