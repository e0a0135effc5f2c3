"""Chrome trace times in milliseconds where the format requires microseconds."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"chrome_trace_opens_in_perfetto": ["units_are_microseconds", "one_track_per_request",
                                                  "counters_are_c_events"]}


def to_chrome_trace(spans, counters=()):
    groups = by_request(spans)
    start = lambda rid: min(s.start_time for s in groups[rid])  # noqa: E731
    events = []
    for tid, rid in enumerate(sorted(groups, key=lambda r: (start(r), r)), start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": rid}})
        for s in sorted(groups[rid], key=lambda s: (s.start_time, s.parent is not None, -s.end_time)):
            events.append({"name": s.name, "ph": "X", "ts": s.start_time / 1e6,          # BUG: ms, not us
                           "dur": (s.end_time - s.start_time) / 1e6,
                           "pid": 1, "tid": tid, "args": {}})
    for c in counters:
        events.append({"name": c["name"], "ph": "C", "ts": c["time"] * 1e3, "pid": 1, "args": {"value": c["value"]}})
    return {"traceEvents": events}
