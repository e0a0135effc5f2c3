"""One track per stage kind (queue, prefill, ...) instead of one per request: stages of
requests that run at the same time overlap on one track and nothing nests."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"chrome_trace_opens_in_perfetto": ["units_are_microseconds", "one_track_per_request",
                                                  "spans_nest_on_each_track"]}

TRACKS = ["request", "queue", "prefill", "decode", "parse", "side_effect"]


def to_chrome_trace(spans, counters=()):
    events = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i, "args": {"name": name}}
              for i, name in enumerate(TRACKS)]
    for s in sorted(spans, key=lambda s: s.start_time):
        tid = 0 if s.parent is None else TRACKS.index(s.name)   # BUG: one track per stage kind
        events.append({"name": s.name, "ph": "X", "ts": s.start_time / 1000, "dur": (s.end_time - s.start_time) / 1000,
                       "pid": 1, "tid": tid, "args": dict(s.attributes)})
    for c in counters:
        events.append({"name": c["name"], "ph": "C", "ts": c["time"] * 1e6, "pid": 1, "args": {"value": c["value"]}})
    return {"traceEvents": events}
