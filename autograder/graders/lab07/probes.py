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

from ._inputs import (EOS, G, PROMPTS, STREAM_END, TRACES, engine_class, run_trace, sample, scripted,  # noqa: F401
                      tiny_model, tiny_prompts, tiny_tokenizer)
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
    """add_request on small engines: under and over max_waiting, a request that never fits and
    one that just fits, one that fits alone despite the watermark, bad prompt_ids, params as a
    dict and as None, and a model with a context of 4 tokens (past it and exactly at it)."""
    with one_thread():
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
        attempt("fits_alone", e3, list(PROMPTS["q1"]), G(2))   # 3 + 2 - 1 = 4 tokens: 2 blocks; no watermark alone
        attempt("empty", e2, [], G(4))
        attempt("out_of_vocab", e2, [99], G(4))
        e4 = Engine(scripted(), None, EngineConfig(num_blocks=8, block_size=2), clock=FakeClock())
        for key, params in (("dict_params", G(4)), ("none_params", None)):
            try:
                e4.add_request([8], params)
                out[key] = "accepted"
            except Exception as e:
                out[key] = raised(e)
        e5 = Engine(scripted(max_context=4), None, EngineConfig(num_blocks=64, block_size=2), clock=FakeClock())
        attempt("past_context", e5, [8], G(5))     # 1 + 5 - 1 = 5 tokens > a context of 4
        attempt("at_context", e5, [8], G(4))       # 4 tokens: exactly the context
        return out


def replay(ns, reason: str, seeded: bool = False):
    """replay_in_engine(the student's Engine, the saved `reason` sample)."""
    with one_thread():
        fn = function(ns, "replay_in_engine")
        Engine = engine_class(ns)
        try:
            return {"result": fn(Engine, sample(reason, seeded))}
        except Exception as e:
            return {"result": raised(e)}
