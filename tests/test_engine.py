"""course.engine: continuous batching must not change any request's tokens, must give
every block back on every ending in the same step, must keep FCFS order, and must
end exactly the requests that should end, with the right reasons."""
import pytest

from course import FakeClock, FinishReason
from course.batched import ScriptedBatchedModel, SimulatedCost, solo_greedy
from course.decoder import CourseDecoder
from course.engine import Engine, EngineConfig, QueueFull, RequestOutput, RequestParams, RequestRefused, drain
from course.tiny_model import LAB_PROMPTS, TINY_MODEL_DIR

pytestmark = pytest.mark.usefixtures("one_thread")  # fixture in conftest.py

GREEDY = RequestParams(temperature=0, max_tokens=8)

# A scripted world: ids are indexes into VOCAB; each prompt (one token) has a script.
VOCAB = ["<e>", "Hel", "lo", " wo", "rld", "\nUs", "er:", "!", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"]
EOS = 0
P = {f"p{i}": (7 + i,) for i in range(1, 9)}         # one-token prompts, ids 8..15
LONG = [7] * 40


def scripts(**extra):
    base = {P["p1"]: [1, 2, 3, 4, 0],                      # "Hello world" then EOS
            P["p2"]: [1, 2, 5, 6, 7, 7],                   # "Hello\nUser:!!": a stop string across 2 tokens
            P["p3"]: [2] * 30,                             # never ends by itself
            P["p4"]: [3, 4, 7, 0],
            P["p5"]: [7, 7, 1, 0],
            P["p6"]: [4, 4, 4, 4, 4, 0],
            P["p7"]: LONG,
            P["p8"]: [1, 0]}
    base.update(extra)
    return base


def scripted(**kw):
    return ScriptedBatchedModel(VOCAB, scripts(), eos_token_id=EOS, **kw)


def run(engine, on_step=None):
    return drain(engine, on_step=on_step)


def collect(engine, on_step=None):
    """Step to the end; every output by request id, in order."""
    seen = {}
    while engine.has_unfinished():
        outs = engine.step()
        for o in outs:
            seen.setdefault(o.request_id, []).append(o)
        if on_step is not None:
            on_step(engine, outs)
    return seen


# ---------------------------------------------------------------- the tiny model

@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(TINY_MODEL_DIR, local_files_only=True)
    dec = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cpu")
    prompts = [tok(p).input_ids for p in LAB_PROMPTS[::2]]
    solo = [solo_greedy(dec, p, 24, tok.eos_token_id)[0] for p in prompts]
    return dec, tok, prompts, solo


@pytest.mark.parametrize("config", [
    EngineConfig(num_blocks=80, block_size=8, max_batch=4),
    EngineConfig(num_blocks=14, block_size=4, max_batch=11, watermark_blocks=1),   # forces preemption
])
def test_tiny_model_tokens_equal_each_request_alone(tiny, config):
    dec, tok, prompts, solo = tiny
    engine = Engine(dec, tok, config, clock=FakeClock())
    ids = []
    arrivals = iter(prompts)

    def arrive(engine, outputs):   # one new request per step: every batch mixes prefill and decode
        p = next(arrivals, None)
        if p is not None:
            ids.append(engine.add_request(p, RequestParams(temperature=0, max_tokens=24)))
    arrive(engine, [])
    done = run(engine, on_step=arrive)
    assert [done[i].raw_token_ids for i in ids] == solo
    assert engine.stats()["kv_blocks_used"] == 0
    if config.num_blocks == 14:
        assert engine.stats()["preemptions"] > 0
    for i, p in zip(ids, prompts):
        assert done[i].text_delta == tok.decode([t for t in done[i].raw_token_ids if t != tok.eos_token_id])


# ---------------------------------------------------------------- scheduling

def test_preempted_requests_finish_with_their_solo_tokens():
    model = scripted()
    engine = Engine(model, config=EngineConfig(num_blocks=9, block_size=2, max_batch=8, watermark_blocks=0))
    ids = {k: engine.add_request(list(P[k]), RequestParams(temperature=0, max_tokens=12)) for k in ("p3", "p6", "p7")}
    done = run(engine)
    assert engine.stats()["preemptions"] > 0
    assert done[ids["p3"]].raw_token_ids == [2] * 12
    assert done[ids["p6"]].raw_token_ids == [4] * 5 + [0]
    assert done[ids["p7"]].raw_token_ids == [7] * 12
    assert engine.pool.allocator.num_free == 9


def test_preemption_takes_the_newest_running_request():
    model = scripted()
    engine = Engine(model, config=EngineConfig(num_blocks=6, block_size=2, max_batch=8, watermark_blocks=0))
    a = engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=10))
    b = engine.add_request(list(P["p7"]), RequestParams(temperature=0, max_tokens=10))
    firsts = {}
    while engine.has_unfinished():
        for o in engine.step():
            if o.finished:
                firsts.setdefault("order", []).append(o.request_id)
        if engine.stats()["preemptions"] and "state" not in firsts:
            firsts["state"] = ([r.id for r in engine.running], [r.id for r in engine.waiting])
    assert firsts["state"] == ([a], [b])
    assert firsts["order"] == [a, b]


def test_fcfs_admission_never_skips_the_oldest():
    """A big request at the head waits for room; small ones behind it wait too."""
    model = scripted()
    engine = Engine(model, config=EngineConfig(num_blocks=8, block_size=2, max_batch=8, watermark_blocks=0))
    first = engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=8))
    engine.step()
    big = engine.add_request(list(P["p7"]) + [7] * 9, RequestParams(temperature=0, max_tokens=4))
    small = engine.add_request(list(P["p8"]), RequestParams(temperature=0, max_tokens=2))
    admitted = []
    while engine.has_unfinished():
        engine.step()
        for r in engine.running:
            if r.id not in admitted:
                admitted.append(r.id)
    assert admitted.index(big) < admitted.index(small)
    assert first in admitted


def test_no_request_waits_forever_under_a_stream_of_small_ones():
    model = scripted()
    engine = Engine(model, config=EngineConfig(num_blocks=10, block_size=2, max_batch=8, watermark_blocks=1))
    big = engine.add_request(list(P["p7"]) + [7] * 7, RequestParams(temperature=0, max_tokens=4))
    finished = []
    for step in range(60):
        engine.add_request(list(P["p8"]), RequestParams(temperature=0, max_tokens=2))
        finished += [o.request_id for o in engine.step() if o.finished]
        if big in finished:
            break
    assert big in finished


def test_watermark_holds_blocks_back_from_admission():
    engine = Engine(scripted(), config=EngineConfig(num_blocks=4, block_size=2, watermark_blocks=2))
    a = engine.add_request([8, 8, 8], RequestParams(temperature=0, max_tokens=2))   # 2 blocks, 2 left: admitted
    b = engine.add_request(list(P["p8"]), RequestParams(temperature=0, max_tokens=2))   # would leave 1 < 2
    engine.step()
    assert [r.id for r in engine.running] == [a] and [r.id for r in engine.waiting] == [b]


def test_max_batch_limits_running():
    engine = Engine(scripted(), config=EngineConfig(num_blocks=64, block_size=2, max_batch=2))
    for k in ("p1", "p3", "p4"):
        engine.add_request(list(P[k]), GREEDY)
    engine.step()
    assert engine.stats()["running"] == 2 and engine.stats()["waiting"] == 1


def test_batching_beats_sequential_on_the_cost_model():
    """Step cost = 1 + 0.05 * tokens fed; 8 requests of 16 tokens each."""
    def throughput(max_batch):
        clock = FakeClock()
        model = SimulatedCost(scripted(), clock, fixed=1.0, per_token=0.05)
        engine = Engine(model, config=EngineConfig(num_blocks=200, block_size=4, max_batch=max_batch), clock=clock)
        for _ in range(8):
            engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=16))
        done = run(engine)
        return sum(len(o.raw_token_ids) for o in done.values()) / clock()
    assert throughput(8) >= 4 * throughput(1)


# ---------------------------------------------------------------- every ending

def finals(engine, keys, params=None, **kw):
    ids = {k: engine.add_request(list(P[k]), params or RequestParams(temperature=0, max_tokens=10), **kw)
           for k in keys}
    seen = collect(engine)
    return ids, seen


def test_eos_stop_token_stop_string_and_length():
    engine = Engine(scripted())
    ids = {
        "eos": engine.add_request(list(P["p1"]), RequestParams(temperature=0, max_tokens=10)),
        "stop_token": engine.add_request(list(P["p4"]), RequestParams(temperature=0, max_tokens=10,
                                                                      stop_token_ids=[7])),
        "stop_string": engine.add_request(list(P["p2"]), RequestParams(temperature=0, max_tokens=10,
                                                                       stop=["\nUser:"])),
        "length": engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=3)),
        "eos_last": engine.add_request(list(P["p8"]), RequestParams(temperature=0, max_tokens=2)),
    }
    seen = collect(engine)
    last = {k: seen[i][-1] for k, i in ids.items()}
    text = {k: "".join(o.text_delta for o in seen[i]) for k, i in ids.items()}
    assert (last["eos"].finish_reason, last["eos"].stop_reason, text["eos"]) == (FinishReason.STOP, None, "Hello world")
    assert last["eos"].raw_token_ids == [1, 2, 3, 4, 0]
    assert (last["stop_token"].finish_reason, last["stop_token"].stop_reason, text["stop_token"]) == \
        (FinishReason.STOP, 7, " world")
    assert (last["stop_string"].finish_reason, last["stop_string"].stop_reason, text["stop_string"]) == \
        (FinishReason.STOP, "\nUser:", "Hello")
    assert last["stop_string"].raw_token_ids == [1, 2, 5, 6]
    assert (last["length"].finish_reason, text["length"]) == (FinishReason.LENGTH, "lololo")
    assert last["eos_last"].finish_reason == FinishReason.STOP      # EOS on the last allowed token is stop
    assert engine.pool.allocator.num_free == engine.config.num_blocks
    assert engine.stats()["finished_by_reason"]["stop"] == 4
    for o in seen[ids["stop_string"]]:
        assert "\n" not in o.text_delta                           # held back, never streamed


def test_ignore_eos_and_include_stop_str():
    engine = Engine(scripted())
    a = engine.add_request(list(P["p8"]), RequestParams(temperature=0, max_tokens=2, ignore_eos=True))
    b = engine.add_request(list(P["p2"]), RequestParams(temperature=0, max_tokens=10, stop=["User"],
                                                        include_stop_str_in_output=True))
    run(engine)
    assert engine.final_output(a).finish_reason == FinishReason.LENGTH
    assert engine.final_output(a).text_delta == "Hel<e>"
    assert engine.final_output(b).text_delta == "Hello\nUser"


def test_abort_frees_blocks_now_and_nothing_follows():
    for abort_after in range(5):
        engine = Engine(scripted(), config=EngineConfig(num_blocks=32, block_size=2))
        a = engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=20))
        b = engine.add_request(list(P["p7"]), RequestParams(temperature=0, max_tokens=6))
        for _ in range(abort_after):
            engine.step()
        used_by_b = len(next((r.cache.block_table for r in engine.running if r.id == b and r.cache), []))
        before = engine.pool.allocator.num_free
        engine.abort(a)
        assert engine.pool.allocator.num_free == 32 - used_by_b if abort_after else before
        after = collect(engine)
        assert a not in after
        assert [o.finish_reason for o in after[b]][-1] == FinishReason.LENGTH
        assert engine.final_output(a).finish_reason == FinishReason.CANCELLED
        assert engine.final_output(a).raw_token_ids == [2] * abort_after
        assert engine.pool.allocator.num_free == 32
        engine.abort(a)          # a late cancel is ignored
        engine.abort("nobody")


def test_deadline_ends_running_and_waiting_requests():
    clock = FakeClock()
    engine = Engine(scripted(), config=EngineConfig(num_blocks=32, block_size=2, max_batch=1), clock=clock)
    a = engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=20, deadline=2.5))
    b = engine.add_request(list(P["p6"]), RequestParams(temperature=0, max_tokens=20, deadline=1.5))
    seen = collect(engine, on_step=lambda e, o: clock.advance(1.0))
    assert seen[a][-1].finish_reason == FinishReason.TIMEOUT and seen[a][-1].raw_token_ids == [2, 2, 2]
    assert seen[b][-1].finish_reason == FinishReason.TIMEOUT and seen[b][-1].raw_token_ids == []
    assert engine.pool.allocator.num_free == 32


def test_a_model_error_ends_only_its_request():
    for kw in ({"raise_at": {P["p3"]: 2}}, {"nan_at": {P["p3"]: 2}}):
        engine = Engine(scripted(**kw))
        ids, seen = finals(engine, ["p1", "p3", "p6"])
        bad = seen[ids["p3"]][-1]
        assert bad.finish_reason == FinishReason.ERROR and bad.raw_token_ids == [2, 2]
        assert bad.error
        assert seen[ids["p1"]][-1].raw_token_ids == [1, 2, 3, 4, 0]
        assert seen[ids["p6"]][-1].raw_token_ids == [4] * 5 + [0]
        assert engine.pool.allocator.num_free == engine.config.num_blocks


def test_sampled_requests_are_reproducible_across_batching():
    def tokens(max_batch):
        engine = Engine(scripted(), config=EngineConfig(max_batch=max_batch))
        ids = [engine.add_request(list(P["p3"]), RequestParams(temperature=1.0, seed=s, max_tokens=10))
               for s in range(4)]
        run(engine)
        return [engine.final_output(i).raw_token_ids for i in ids]
    assert tokens(4) == tokens(1)
    assert len({tuple(t) for t in tokens(4)}) > 1


# ---------------------------------------------------------------- admission errors and params

def test_queue_full_and_refusals():
    engine = Engine(scripted(), config=EngineConfig(num_blocks=4, block_size=2, max_waiting=2,
                                                    watermark_blocks=1))
    engine.add_request(list(P["p1"]), GREEDY)
    engine.add_request(list(P["p1"]), GREEDY, request_id="a")
    with pytest.raises(QueueFull, match="max_waiting=2"):
        engine.add_request(list(P["p1"]), GREEDY)
    # 1 + 9 - 1 = 9 tokens need 5 blocks of 2 (the last token is never fed back)
    with pytest.raises(RequestRefused, match="need 5 blocks"):
        engine.add_request(list(P["p1"]), RequestParams(max_tokens=9))
    with pytest.raises(RequestRefused, match="context of 8"):
        Engine(ScriptedBatchedModel(VOCAB, scripts(), max_context=8)).add_request([8], RequestParams(max_tokens=9))
    Engine(ScriptedBatchedModel(VOCAB, scripts(), max_context=8)).add_request([8], RequestParams(max_tokens=8))
    engine.step()
    with pytest.raises(ValueError, match="unique"):
        engine.add_request([8], GREEDY, request_id="a")


@pytest.mark.parametrize("prompt, params, message", [
    ([], None, "`prompt_ids` must be a non-empty list"),
    ([99], None, "`prompt_ids` must hold integer ids in"),
    ([True], None, "`prompt_ids` must hold integer ids in"),
    ([8], {"max_tokens": 0}, "`max_tokens` must be an integer >= 1, got 0."),
    ([8], {"top_p": 1.5}, "`top_p` must be in \\(0, 1\\], got 1.5."),
    ([8], {"temperature": -1}, "`temperature` must be"),
    ([8], {"stop": [""]}, "`stop` must not contain an empty string"),
    ([8], {"colour": 1}, "unknown"),
])
def test_bad_requests_are_rejected(prompt, params, message):
    engine = Engine(scripted())
    with pytest.raises(ValueError, match=message):
        engine.add_request(prompt, params)
    assert not engine.has_unfinished()


def test_params_from_other_objects():
    from course.sampling import SamplingParams
    p = RequestParams.coerce(SamplingParams(temperature=0.5, top_k=3, seed=1))
    assert (p.temperature, p.top_k, p.seed, p.max_tokens) == (0.5, 3, 1, 16)
    assert RequestParams.coerce({"max_tokens": 4, "stop": None, "seed": None}).stop == ()
    assert RequestParams.coerce(None) == RequestParams()


@pytest.mark.parametrize("kw, message", [
    ({"num_blocks": 0}, "`num_blocks` must be an integer >= 1, got 0."),
    ({"num_blocks": 4, "watermark_blocks": 4}, "`watermark_blocks` must be an integer in \\[0, 3\\], got 4."),
    ({"max_batch": 1.5}, "`max_batch` must be an integer >= 1, got 1.5."),
])
def test_bad_config(kw, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**kw)


def test_engine_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`model` must be"):
        Engine(object())
    with pytest.raises(ValueError, match="`config` must be an EngineConfig"):
        Engine(scripted(), config={"num_blocks": 3})
    with pytest.raises(ValueError, match="`clock` must be callable"):
        Engine(scripted(), clock=3)


# ---------------------------------------------------------------- tracing

def test_tracer_spans_give_queue_ttft_tpot_and_counters():
    from course.tracing import RequestTracer, group_by_request, request_metrics
    clock = FakeClock()
    tracer = RequestTracer(clock)
    model = SimulatedCost(scripted(), clock, fixed=1.0, per_token=0.0)
    engine = Engine(model, config=EngineConfig(max_batch=1), clock=clock, tracer=tracer)
    a = engine.add_request(list(P["p1"]), GREEDY)
    b = engine.add_request(list(P["p8"]), GREEDY)
    c = engine.add_request(list(P["p3"]), GREEDY)
    engine.abort(c)
    run(engine)
    assert tracer.open_requests() == []
    spans = group_by_request(tracer.finished_spans())
    ma, mb = request_metrics(spans[a]), request_metrics(spans[b])
    # a: 5 steps of 1 s from t = 0; b waits for them, then 2 steps.
    assert (ma["queue"], ma["ttft"], ma["tpot"], ma["output_tokens"], ma["e2e"]) == (0.0, 1.0, 1.0, 5, 5.0)
    assert (mb["queue"], mb["ttft"], mb["tpot"], mb["output_tokens"], mb["e2e"]) == (5.0, 6.0, 1.0, 2, 7.0)
    assert [s.name for s in spans[b] if s.parent is not None] == ["queue", "prefill", "decode"]
    reasons = {rid: [s.attributes["gen_ai.response.finish_reasons"] for s in sp if s.parent is None][0]
               for rid, sp in spans.items()}
    assert reasons == {a: ("stop",), b: ("stop",), c: ("cancelled",)}
    sizes = [x["value"] for x in tracer.counters() if x["name"] == "batch_size"]
    assert sizes == [1] * 7
    assert max(x["value"] for x in tracer.counters() if x["name"] == "kv_blocks_in_use") >= 1


def test_tracer_sees_a_preempted_request_queue_again():
    from course.tracing import RequestTracer, group_by_request
    tracer = RequestTracer(FakeClock())
    engine = Engine(scripted(), config=EngineConfig(num_blocks=6, block_size=2, watermark_blocks=0),
                    tracer=tracer, clock=FakeClock())
    engine.add_request(list(P["p3"]), RequestParams(temperature=0, max_tokens=10))
    b = engine.add_request(list(P["p7"]), RequestParams(temperature=0, max_tokens=10))
    run(engine)
    assert engine.stats()["preemptions"] >= 1
    stages = [s.name for s in group_by_request(tracer.finished_spans())[b] if s.parent is not None]
    assert stages[:3] == ["queue", "prefill", "decode"] and stages.count("queue") >= 2
    assert stages[-1] == "decode"


def test_request_output_finished_flag():
    assert not RequestOutput("r", [1], "a").finished
    assert RequestOutput("r", [1], "a", FinishReason.STOP).finished


@pytest.mark.gpu
def test_tiny_model_on_cuda_gives_the_cpu_tokens(tiny):
    dec, tok, prompts, solo = tiny
    cuda = CourseDecoder.from_pretrained(TINY_MODEL_DIR, device="cuda")
    engine = Engine(cuda, tok, EngineConfig(num_blocks=64, block_size=8, max_batch=8), clock=FakeClock())
    ids = [engine.add_request(p, RequestParams(temperature=0, max_tokens=24)) for p in prompts]
    done = run(engine)
    assert [done[i].raw_token_ids for i in ids] == solo
    assert engine.pool.k.device.type == "cuda" and engine.stats()["kv_blocks_used"] == 0


class _Bytes:
    """Byte pieces of VOCAB, with ids 5 and 6 the two halves of "中" (e4 b8 | ad)."""
    eos_token_id = EOS
    pieces = [v.encode() for v in VOCAB[:5]] + [b"\xe4\xb8", b"\xad"] + [v.encode() for v in VOCAB[7:]]

    def decode(self, ids):
        return b"".join(self.pieces[int(i)] for i in ids).decode("utf-8", errors="replace")


@pytest.mark.parametrize("stop, deltas, final, reason", [
    # "Hello" then half of 中: the "o" may begin "o中!", so it is held with the half character
    ("o\u4e2d!", ["Hel", "l", "", "", ""], "Hell", FinishReason.STOP),
    # "o中?" never completes: the held "o" and 中 go out together once "!" rules the stop out
    ("o\u4e2d?", ["Hel", "l", "", "", "o\u4e2d!", "!"], "Hello\u4e2d!!", FinishReason.LENGTH),
])
def test_text_held_for_a_stop_string_waits_for_a_split_character(stop, deltas, final, reason):
    engine = Engine(scripted(), _Bytes(), EngineConfig(num_blocks=16, block_size=2))
    rid = engine.add_request([9], RequestParams(temperature=0, max_tokens=6, stop=[stop]))
    outs = []
    while engine.has_unfinished():
        outs += [o for o in engine.step() if o.request_id == rid]
    assert [o.text_delta for o in outs] == deltas
    assert outs[-1].finish_reason == reason and "".join(o.text_delta for o in outs) == final
