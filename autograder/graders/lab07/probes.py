"""lab07's probes: they run in the student's process and return plain data. No reference here.

Every engine case is a TRACE (the table TRACES, by name): requests arrive at given steps,
some are aborted at given steps, and `run_trace` steps an engine to the end on a FakeClock.
The model the engine gets is wrapped in a `Watch` (built in _inputs.py, like any input): it logs
every forward pass as rows [request, cached tokens, new tokens] and keeps each request's
cache, so a probe reads a request's blocks from its cache instead of trusting what the engine
says about itself; the pool's free blocks are the grader's own count (checks.Ledger: the ids
the allocator handed out and got back), never the allocator's counters. The tests rerun the
same trace on the reference engine.

A probe is a public function whose first parameter is `ns` (the student's namespace).
"""
from __future__ import annotations

import copy

from course.batched import EngineConfig, RequestParams
from course.clock import FakeClock

from autograder.checks import one_thread
from autograder.core import Fail, function, raised

from ._inputs import (EOS, G, PROMPTS, STREAM_END, TRACES, admission_attempts, engine_class,  # noqa: F401
                      run_trace, scripted, tiny_model, tiny_prompts, tiny_tokenizer)
from ._samples import replay_record, sample  # noqa: F401
from ._workload import WORKLOAD, run_workload, workload_model, workload_prompts  # noqa: F401

# ================================================================= probes

def trace(ns, name: str):
    """The student's Engine through TRACES[name]: run_trace's plain data, or the exception
    the engine raised mid-trace (judged as a failure with its message)."""
    spec = copy.deepcopy(TRACES[name])
    with one_thread():
        try:
            return run_trace(engine_class(ns), **spec)
        except Fail:
            raise
        except Exception as e:
            return raised(e)


def throughput(ns):
    """The throughput trace with max_batch 8 ("batched") and 1 ("sequential")."""
    with one_thread():
        Engine = engine_class(ns)
        try:
            return {"batched": run_trace(Engine, **copy.deepcopy(TRACES["throughput_8"])),
                    "sequential": run_trace(Engine, **copy.deepcopy(TRACES["throughput_1"]))}
        except Exception as e:
            return raised(e)


def workload(ns):
    """The student's Engine through the performance WORKLOAD: run_workload's plain data (the
    Watch's log and clock), or the exception the engine raised."""
    with one_thread():
        Engine = engine_class(ns)
        try:
            return run_workload(Engine, **copy.deepcopy(WORKLOAD))
        except Fail:
            raise
        except Exception as e:
            return raised(e)


def admission(ns):
    """add_request on small engines (admission_attempts): under and over max_waiting, a request
    that never fits and one that just fits, one that fits alone despite the watermark, bad
    prompt_ids, params as a dict and as None, and a model with a context of 4 tokens."""
    with one_thread():
        function(ns, "check_admission")       # add_request needs only this one
        return admission_attempts(function(ns, "Engine"))


def replay(ns, reason: str, seeded: bool = False):
    """replay_in_engine(the student's Engine, the saved `reason` sample)."""
    with one_thread():
        fn = function(ns, "replay_in_engine")
        Engine = engine_class(ns)
        try:
            return {"result": fn(Engine, sample(reason, seeded))}
        except Exception as e:
            return {"result": raised(e)}


def replay_variant(ns, kind: str):
    """replay_in_engine(the student's Engine, replay_record(kind)): a record built from a saved sample."""
    with one_thread():
        fn = function(ns, "replay_in_engine")
        Engine = engine_class(ns)
        try:
            return {"result": fn(Engine, replay_record(kind))}
        except Exception as e:
            return {"result": raised(e)}
