"""course.serve: the OpenAI-compatible server over the reference engine, checked with
the official openai client against a real server on a free loopback port.

Expected texts come from the same engine run directly (course.engine.drain), never from
the server itself. Nothing here asserts on time: waits poll /metrics a bounded number of
times and fail if the state never comes; the idle engine loop is judged by the steps it
counts, never by how fast it runs.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import httpx
import openai
import pytest

from course.engine import RequestParams
from course.serve import (IDLE_WAIT_S, APIErrorResponse, BackgroundServer, EngineLoop, EngineProcess,
                          ProcessEngineLoop, ServerMetrics, Tracked, build_app, parse_metrics, parse_request,
                          render_chat, start_background, tiny_engine, tiny_tokenizer)
from course.tiny_model import LAB_PROMPTS

MODEL = "tiny-model"
# vLLM labels an aborted request "abort"; the course's finish reason for it is "cancelled".
CANCELLED = 'course:request_success_total{finished_reason="abort"}'
# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py), the spec for our histograms.
VLLM_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                     10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0]


# ---------------------------------------------------------------- helpers

def client_for(url: str) -> openai.OpenAI:
    # max_retries=0: a 429 must reach the test, not be retried by the client.
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def metrics(url: str) -> dict[str, float]:
    return parse_metrics(httpx.get(f"{url}/metrics", timeout=30).text)


def wait_for_metrics(url: str, ok, polls: int = 1000) -> dict[str, float]:
    """Scrape until ok(metrics) holds; fail (never hang) if it does not within `polls` scrapes."""
    for _ in range(polls):
        m = metrics(url)
        if ok(m):
            return m
        time.sleep(0.01)
    raise AssertionError(f"/metrics never reached the expected state; last scrape: {m}")


def direct_texts(prompts: list[list[int]], **params) -> list[tuple[str, str]]:
    """(text, finish_reason) of each prompt, from a fresh reference engine run directly."""
    from course.engine import RequestParams, drain

    engine, _, _ = tiny_engine()
    ids = [engine.add_request(p, RequestParams(**params)) for p in prompts]
    done = drain(engine)
    return [(done[i].text_delta, str(done[i].finish_reason)) for i in ids]


def stream_text(stream) -> tuple[str, str | None, list]:
    """Join a completions or chat stream: (text, finish_reason of the last choice, chunks)."""
    chunks = list(stream)
    parts, reason = [], None
    for ch in chunks:
        for c in ch.choices:
            piece = c.text if hasattr(c, "text") else (c.delta.content or "")
            parts.append(piece)
            reason = c.finish_reason or reason
    return "".join(parts), reason, chunks


@pytest.fixture(scope="module")
def served(one_thread):
    """The reference engine on the tiny model behind a server on a free port; always stopped."""
    from course.engine import EngineConfig  # noqa: F401  (the engine must exist for these tests)

    engine, tokenizer, context = tiny_engine(num_blocks=256, block_size=16, max_batch=8, max_waiting=64)
    server = start_background(engine, tokenizer, max_model_len=context)
    try:
        yield SimpleNamespace(url=server.url, client=client_for(server.url), tokenizer=tokenizer, engine=engine)
    finally:
        server.stop()
    assert not server.thread.is_alive()


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


# ---------------------------------------------------------------- request checks (no server)

class _Tok:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 50 for c in text]

    def __len__(self):
        return 50


def test_chat_template_is_the_tiny_models_prompt_format():
    assert render_chat([{"role": "user", "content": "weather in Paris"}]) == "User: weather in Paris\nCall: "
    two_turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "{}"},
                 {"role": "user", "content": [{"type": "text", "text": "b"}]}]
    assert render_chat(two_turns) == "User: a\nCall: {}<|endoftext|>User: b\nCall: "


@pytest.mark.parametrize("messages, param", [
    ([], "messages"),
    ([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "messages[0].role"),
    ([{"role": "user", "content": 3}], "messages[0].content"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}], "messages"),
])
def test_chat_template_rejects_what_it_cannot_render(messages, param):
    with pytest.raises(APIErrorResponse) as e:
        render_chat(messages)
    assert e.value.status == 400 and e.value.param == param


def test_parse_request_builds_engine_parameters():
    body = {"model": MODEL, "prompt": "ab", "max_tokens": 5, "temperature": 0, "stop": "x", "seed": 7,
            "stream": True, "stream_options": {"include_usage": True}, "top_k": 3}
    p = parse_request(body, "completion", _Tok(), model_name=MODEL, max_model_len=64)
    assert p.prompt_ids == [ord("a") % 50, ord("b") % 50] and p.stream and p.include_usage
    assert p.params == {"temperature": 0.0, "top_p": 1.0, "top_k": 3, "seed": 7, "max_tokens": 5, "stop": ["x"],
                        "stop_token_ids": [], "ignore_eos": False, "deadline": None}
    chat = parse_request({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, "chat", _Tok(),
                         model_name=MODEL, max_model_len=64)
    # Chat without max_tokens: whatever the context has left (as vLLM does).
    assert chat.params["max_tokens"] == 64 - len(chat.prompt_ids)
    sampled = parse_request({"model": MODEL, "prompt": "ab", "temperature": 0.5}, "completion", _Tok(),
                            model_name=MODEL, max_model_len=64)
    assert isinstance(sampled.params["seed"], int)   # a sampled request always gets a replayable seed


def test_unknown_model_is_404():
    with pytest.raises(APIErrorResponse) as e:
        parse_request({"model": "gpt-4o", "prompt": "a"}, "completion", _Tok(), model_name=MODEL, max_model_len=64)
    assert e.value.status == 404 and e.value.code == "model_not_found"


# ---------------------------------------------------------------- the server, with the official client

@pytest.mark.slow
def test_greedy_text_is_identical_streamed_or_not_and_equals_the_engine(served):
    c, prompt = served.client, LAB_PROMPTS[0]
    whole = c.completions.create(model=MODEL, prompt=prompt, max_tokens=48, temperature=0)
    streamed, reason, _ = stream_text(c.completions.create(model=MODEL, prompt=prompt, max_tokens=48,
                                                           temperature=0, stream=True))
    [(expected, expected_reason)] = direct_texts([encode(served.tokenizer, prompt)], temperature=0, max_tokens=48)
    assert whole.choices[0].text == streamed == expected
    assert whole.choices[0].finish_reason == reason == expected_reason == "stop"
    json.loads(expected)                      # the tool call, whole: the model stopped by itself

    messages = [{"role": "user", "content": "time in London"}]
    chat = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=48, temperature=0)
    chat_streamed, chat_reason, chunks = stream_text(
        c.chat.completions.create(model=MODEL, messages=messages, max_tokens=48, temperature=0, stream=True))
    [(chat_expected, _)] = direct_texts([encode(served.tokenizer, render_chat(messages))], temperature=0,
                                        max_tokens=48)
    assert chat.choices[0].message.content == chat_streamed == chat_expected
    assert chat.choices[0].message.role == "assistant" and chunks[0].choices[0].delta.role == "assistant"
    assert chat_reason == chat.choices[0].finish_reason == "stop"


@pytest.mark.slow
def test_seeded_sampling_replays_streamed_or_not(served):
    c = served.client
    kw = dict(model=MODEL, prompt="A tired dog", max_tokens=24, temperature=1.0, top_p=0.9, seed=1234)
    whole = c.completions.create(**kw).choices[0].text
    streamed, _, _ = stream_text(c.completions.create(**kw, stream=True))
    assert whole == streamed


@pytest.mark.slow
def test_finish_reasons_stop_and_length(served):
    c, prompt = served.client, "The capital of France is"
    eos = c.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0).choices[0]
    assert (eos.text, eos.finish_reason, eos.stop_reason) == (" Paris.", "stop", None)

    cut = c.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0)
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage.completion_tokens == 2 and cut.usage.prompt_tokens == len(encode(served.tokenizer, prompt))
    assert cut.usage.total_tokens == cut.usage.prompt_tokens + 2

    text, reason, chunks = stream_text(c.completions.create(model=MODEL, prompt=prompt, max_tokens=16,
                                                            temperature=0, stop=["."], stream=True))
    assert (text, reason) == (" Paris", "stop")          # the stop string itself is never sent
    assert chunks[-1].choices[0].stop_reason == "."


@pytest.mark.slow
def test_usage_arrives_in_the_last_chunk_when_asked(served):
    c, prompt = served.client, "The small cat"
    whole = c.completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0)
    _, _, chunks = stream_text(c.completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0,
                                                    stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(ch.usage is None for ch in chunks[:-1])
    _, _, plain = stream_text(c.completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0,
                                                   stream=True))
    assert all(ch.usage is None for ch in plain) and plain[-1].choices


@pytest.mark.slow
def test_closing_a_stream_aborts_it_and_frees_its_blocks(served):
    before = metrics(served.url)
    stream = served.client.completions.create(model=MODEL, prompt="The small cat", max_tokens=900,
                                              temperature=0, stream=True, extra_body={"ignore_eos": True})
    received = 0
    for chunk in stream:
        received += len(chunk.choices[0].text)
        if received >= 3:
            break
    running = metrics(served.url)
    assert running["course:num_requests_running"] == 1 and running["course:kv_cache_blocks_used"] >= 1
    stream.close()
    after = wait_for_metrics(served.url, lambda m: m[CANCELLED] == before[CANCELLED] + 1)
    # The abort and the blocks it frees are one engine call: once the cancel is counted,
    # nothing is running and every block is back in the pool.
    assert after["course:num_requests_running"] == 0 and after["course:num_requests_waiting"] == 0
    assert after["course:kv_cache_blocks_used"] == 0 and after["course:kv_cache_usage_perc"] == 0
    # It really was cut short: far fewer than 900 tokens were generated.
    generated = after["course:generation_tokens_total"] - before["course:generation_tokens_total"]
    assert 1 <= generated < 900


@pytest.mark.slow
def test_twenty_concurrent_streams_all_get_their_own_text(served):
    prompts = list(LAB_PROMPTS[:20])
    expected = direct_texts([encode(served.tokenizer, p) for p in prompts], temperature=0, max_tokens=40)

    def one(prompt):
        client = client_for(served.url)
        return stream_text(client.completions.create(model=MODEL, prompt=prompt, max_tokens=40, temperature=0,
                                                     stream=True))[:2]

    with ThreadPoolExecutor(len(prompts)) as pool:
        got = list(pool.map(one, prompts))
    assert got == expected
    m = wait_for_metrics(served.url, lambda m: m["course:num_requests_running"] == 0)
    assert m["course:kv_cache_blocks_used"] == 0


BAD_PARAMETERS = [
    ("temperature", dict(temperature=2.5)),
    ("temperature", dict(temperature=-0.1)),
    ("top_p", dict(top_p=0)),
    ("top_p", dict(top_p=1.5)),
    ("max_tokens", dict(max_tokens=0)),
    ("max_tokens", dict(max_tokens=2000)),          # more than the context can hold
    ("n", dict(n=2)),
    ("stop", dict(stop=[""])),
    ("stop", dict(stop=["a"] * 17)),
    ("seed", dict(extra_body={"seed": "seven"})),
    ("stream_options", dict(stream_options={"include_usage": True})),   # without stream
    ("top_k", dict(extra_body={"top_k": 0.5})),
    ("ignore_eos", dict(extra_body={"ignore_eos": "yes"})),
    ("stop_token_ids", dict(extra_body={"stop_token_ids": [-1]})),
    ("prompt", dict(prompt="")),
    ("prompt", dict(prompt=["one", "two"])),
    ("prompt", dict(prompt=[5, 99999])),
    ("echo", dict(echo=True)),
    ("presence_penalty", dict(presence_penalty=1.0)),
    ("logprobs", dict(logprobs=2)),
    ("best_of", dict(best_of=3)),
    ("frobnicate", dict(extra_body={"frobnicate": 1})),
]


@pytest.mark.slow
@pytest.mark.parametrize("param, kwargs", BAD_PARAMETERS, ids=[f"{p}-{i}" for i, (p, _) in enumerate(BAD_PARAMETERS)])
def test_every_invalid_parameter_is_a_400_naming_it(served, param, kwargs):
    kwargs = {"prompt": "The small cat", **kwargs}
    with pytest.raises(openai.BadRequestError) as e:
        served.client.completions.create(model=MODEL, **kwargs)
    err = e.value
    assert err.status_code == 400 and err.param == param
    assert f"`{param}`" in err.message
    body = err.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    value = {**kwargs, **kwargs.get("extra_body", {})}.get(param)
    if param not in ("stop", "prompt", "frobnicate", "stream_options"):
        assert repr(value) in err.message                 # the value it got, as the course template says


@pytest.mark.slow
@pytest.mark.parametrize("messages, param", [
    ([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "messages[0].role"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}], "messages"),
])
def test_invalid_chat_messages_are_a_400(served, messages, param):
    with pytest.raises(openai.BadRequestError) as e:
        served.client.chat.completions.create(model=MODEL, messages=messages)
    assert e.value.param == param


@pytest.mark.slow
def test_unknown_model_and_bad_json(served):
    with pytest.raises(openai.NotFoundError) as e:
        served.client.completions.create(model="gpt-4o", prompt="hi")
    assert e.value.code == "model_not_found"
    r = httpx.post(f"{served.url}/v1/completions", content=b"{not json", timeout=30)
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.slow
def test_health_and_metric_names(served):
    health = httpx.get(f"{served.url}/health", timeout=30).json()
    assert health["status"] == "ok" and health["kv_blocks_total"] == 256
    served.client.completions.create(model=MODEL, prompt="9 - 4 =", max_tokens=4, temperature=0)
    text = httpx.get(f"{served.url}/metrics", timeout=30).text
    m = parse_metrics(text)
    for name in ("course:num_requests_running", "course:num_requests_waiting", "course:kv_cache_usage_perc",
                 "course:num_preemptions_total", "course:prompt_tokens_total", "course:generation_tokens_total",
                 'course:request_success_total{finished_reason="stop"}',
                 'course:request_success_total{finished_reason="length"}',
                 "course:time_to_first_token_seconds_count", "course:inter_token_latency_seconds_count",
                 "course:request_time_per_output_token_seconds_count", "course:e2e_request_latency_seconds_count",
                 "course:kv_cache_blocks_used", "course:kv_cache_blocks_total"):
        assert name in m, name
    assert "course:time_per_output_token_seconds_count" not in m     # vLLM's deprecated name for ITL
    assert m["course:time_to_first_token_seconds_count"] >= 1

    def edges(name):
        return [float(k.split('le="')[1].rstrip('"}')) for k in m if k.startswith(f"course:{name}_bucket")
                and "+Inf" not in k]

    assert edges("time_to_first_token_seconds") == VLLM_TTFT_BUCKETS
    assert edges("inter_token_latency_seconds") == VLLM_TPOT_BUCKETS
    assert edges("request_time_per_output_token_seconds") == VLLM_TPOT_BUCKETS


@pytest.fixture(scope="module", params=["thread", "process"])
def small_server(one_thread, request):
    """One running slot and one waiting slot, 48 blocks of 16 tokens, the engine in a thread
    of the server or in a process of its own (what `python -m course.serve` runs); always stopped."""
    config = dict(num_blocks=48, block_size=16, max_batch=1, max_waiting=1)
    if request.param == "thread":
        engine, tokenizer, context = tiny_engine(**config)
    else:
        (tokenizer, context), engine = tiny_tokenizer(), EngineProcess(config, threads=1)
    server = start_background(engine, tokenizer, max_model_len=context)
    try:
        yield SimpleNamespace(url=server.url, client=client_for(server.url))
    finally:
        server.stop()


@pytest.mark.slow
def test_overload_is_answered_429_at_once_and_never_queued(small_server):
    c, long = small_server.client, dict(model=MODEL, prompt="The small cat", max_tokens=700, temperature=0,
                                        stream=True, extra_body={"ignore_eos": True})
    running = c.completions.create(**long)
    next(iter(running))                                   # it holds the only batch slot
    waiting = c.completions.create(**long)                # it fills the waiting queue
    wait_for_metrics(small_server.url, lambda m: m["course:num_requests_waiting"] == 1)
    for stream in (False, True):
        with pytest.raises(openai.RateLimitError) as e:
            c.completions.create(model=MODEL, prompt="hi", max_tokens=4, stream=stream)
        assert e.value.status_code == 429 and e.value.code == "queue_full"
        assert e.value.response.headers["retry-after"] == "1"
    assert metrics(small_server.url)['course:requests_rejected_total{reason="queue_full"}'] == 2
    running.close()
    waiting.close()
    m = wait_for_metrics(small_server.url, lambda m: m[CANCELLED] == 2)
    assert m["course:kv_cache_blocks_used"] == 0 and m["course:num_requests_waiting"] == 0


@pytest.mark.slow
def test_a_request_larger_than_the_pool_is_a_400_not_a_wait(small_server):
    # 48 blocks of 16 tokens hold 768 tokens: this request fits the context but never the pool.
    with pytest.raises(openai.BadRequestError) as e:
        small_server.client.completions.create(model=MODEL, prompt="The small cat", max_tokens=800)
    assert e.value.param == "max_tokens" and e.value.code == "request_refused"


@pytest.mark.slow
def test_abnormal_endings_on_the_wire(one_thread):
    """timeout passes through as a finish_reason; error becomes HTTP 500 / an SSE error event."""
    from course.batched import ScriptedBatchedModel
    from course.engine import Engine, EngineConfig

    vocab = ["<eos>", "a", "b", "c"]
    model = ScriptedBatchedModel(vocab, {(1,): [2, 3, 2, 0], (2,): [3, 2, 3, 0]}, eos_token_id=0,
                                 nan_at={(2,): 1})
    engine = Engine(model, None, EngineConfig(num_blocks=8, block_size=4))
    with BackgroundServer(build_app(engine, None, max_model_len=64)) as server:
        c = client_for(server.url)
        ok = c.completions.create(model=MODEL, prompt=[1], max_tokens=8, temperature=0)
        assert (ok.choices[0].text, ok.choices[0].finish_reason) == ("bcb", "stop")
        with pytest.raises(openai.InternalServerError) as e:
            c.completions.create(model=MODEL, prompt=[2], max_tokens=8, temperature=0)
        assert e.value.status_code == 500 and e.value.code == "engine_error"
        with pytest.raises(openai.APIError) as e:
            stream_text(c.completions.create(model=MODEL, prompt=[2], max_tokens=8, temperature=0, stream=True))
        assert "NaN" in e.value.message
        m = metrics(server.url)
        assert m['course:request_success_total{finished_reason="error"}'] == 2
        assert m["course:kv_cache_blocks_used"] == 0

    engine = Engine(model, None, EngineConfig(num_blocks=8, block_size=4))
    with BackgroundServer(build_app(engine, None, max_model_len=64, request_timeout=1e-9)) as server:
        late = client_for(server.url).completions.create(model=MODEL, prompt=[1], max_tokens=8, temperature=0)
        assert late.choices[0].finish_reason == "timeout"


def test_a_request_that_can_never_be_admitted_is_a_400_at_once(one_thread):
    """5 prompt tokens + 3 to generate cache 5 + 3 - 1 = 7 tokens, more than 6 one-token
    blocks: it could never run, even alone, so the engine refuses it at add_request and the
    server says 400 in OpenAI's error shape at once, instead of queueing it for ever."""
    from course.batched import ScriptedBatchedModel
    from course.engine import Engine, EngineConfig

    model = ScriptedBatchedModel(["<eos>", "a", "b"], {(1, 1, 1, 1, 1): [2, 2, 0]}, eos_token_id=0)
    engine = Engine(model, None, EngineConfig(num_blocks=6, block_size=1, watermark_blocks=2))
    with BackgroundServer(build_app(engine, None, max_model_len=64)) as server:
        r = httpx.post(f"{server.url}/v1/completions", timeout=30,
                       json={"model": MODEL, "prompt": [1, 1, 1, 1, 1], "max_tokens": 3})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "max_tokens",
                                                                  "request_refused")
        assert r.headers["x-should-retry"] == "false"
        assert metrics(server.url)['course:requests_rejected_total{reason="refused"}'] == 1
        assert not engine.has_unfinished()


def test_requests_that_preempt_each_other_all_finish_over_http(one_thread):
    """The pool of 6 one-token blocks with a watermark of 2, and three requests that each fit
    it alone, arriving in this order before the first step: (1 token, max 5), (3 tokens,
    max 4), (3 tokens, max 2). The second is preempted and comes back needing 5 blocks; with
    nothing else running it is admitted again, so every request is answered (an engine that
    kept the watermark on an empty pool left two of them without an answer)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from course.batched import ScriptedBatchedModel
    from course.engine import Engine, EngineConfig

    class HeldEngine(Engine):
        """Steps only once `opened` is set, so the test decides the order of arrival."""
        opened = threading.Event()

        def step(self):
            return super().step() if self.opened.is_set() else []

    prompts = [[1], [2, 2, 2], [3, 3, 3]]
    model = ScriptedBatchedModel(["<eos>", "a", "b", "c"], {tuple(p): [1 + i] * 8 for i, p in enumerate(prompts)},
                                 eos_token_id=0)
    engine = HeldEngine(model, None, EngineConfig(num_blocks=6, block_size=1, watermark_blocks=2, max_batch=4))
    with BackgroundServer(build_app(engine, None, max_model_len=64)) as server, ThreadPoolExecutor(3) as pool:
        answers = []
        for n, (prompt, max_tokens) in enumerate(zip(prompts, (5, 4, 2)), start=1):
            answers.append(pool.submit(httpx.post, f"{server.url}/v1/completions", timeout=20, json={
                "model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}))
            for _ in range(2000):                       # until the engine holds it (bounded)
                if len(engine.waiting) == n:
                    break
                time.sleep(0.005)
            assert len(engine.waiting) == n
        engine.opened.set()
        answers = [a.result() for a in answers]
        assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
        assert [r.json()["choices"][0]["text"] for r in answers] == ["a" * 5, "b" * 4, "c" * 2]
        assert engine.preemptions == 1 and not engine.has_unfinished() and engine.pool.allocator.num_used == 0


class _StuckEngine:
    """Unfinished requests that can never run: step() returns [] for ever."""

    def __init__(self):
        self.steps = 0

    def add_request(self, prompt_ids, params):
        return "stuck"

    def step(self):
        self.steps += 1
        return []

    def abort(self, request_id):
        pass

    def has_unfinished(self):
        return True

    def stats(self):
        return {"running": 0, "waiting": 1}


def test_an_engine_with_nothing_to_run_is_waited_on_not_spun():
    engine = _StuckEngine()
    loop = EngineLoop(engine).start()
    try:
        for _ in range(1000):          # it keeps stepping now and then, so deadlines still fire ...
            if engine.steps >= 3:
                break
            time.sleep(0.01)
        assert engine.steps >= 3
        first, t0 = engine.steps, time.monotonic()
        time.sleep(0.3)
        steps, waited = engine.steps - first, time.monotonic() - t0
    finally:
        loop.stop()
    assert not loop._thread.is_alive()
    # ... but between steps it waits IDLE_WAIT_S for a command; a spinning loop steps thousands of times
    assert steps <= waited / IDLE_WAIT_S + 2, f"{steps} steps of an engine with nothing to run in {waited:.2f} s"
    assert loop.steps == engine.steps


def _route_all(loop, request_id, deliveries):
    for now, n_tokens, finish_reason in deliveries:
        loop._route(SimpleNamespace(request_id=request_id, new_token_ids=[1] * n_tokens,
                                    finish_reason=finish_reason), now)


def test_itl_is_every_gap_and_tpot_one_mean_per_request():
    m = ServerMetrics()
    loop = EngineLoop(_StuckEngine(), metrics=m)
    loop._tracked["a"] = Tracked(queue=None, loop=None, arrival=0.0)
    # tokens at 1.0, 1.1, two at 1.2, 2.2 s: four gaps (0.1, 0.05, 0.05, 1.0), one TPOT (2.2 - 1.0) / 4
    _route_all(loop, "a", [(1.0, 1, None), (1.1, 1, None), (1.2, 2, None), (2.2, 1, "stop")])
    loop._tracked["b"] = Tracked(queue=None, loop=None, arrival=3.0)      # one token: no TPOT at all
    _route_all(loop, "b", [(3.5, 1, "length")])
    loop._tracked["c"] = Tracked(queue=None, loop=None, arrival=4.0)      # aborted after two tokens
    _route_all(loop, "c", [(4.1, 1, None), (4.3, 1, None), (4.4, 0, "cancelled")])
    v = parse_metrics(m.exposition().decode())
    assert v["course:inter_token_latency_seconds_count"] == 5
    assert v["course:inter_token_latency_seconds_sum"] == pytest.approx(0.1 + 0.05 + 0.05 + 1.0 + 0.2)
    assert v["course:request_time_per_output_token_seconds_count"] == 2
    assert v["course:request_time_per_output_token_seconds_sum"] == pytest.approx(0.3 + 0.2)
    assert v["course:time_to_first_token_seconds_count"] == 3
    assert v["course:e2e_request_latency_seconds_sum"] == pytest.approx(2.2 + 0.5 + 0.4)
    assert v['course:request_success_total{finished_reason="abort"}'] == 1
    assert 'course:request_success_total{finished_reason="cancelled"}' not in v


def test_stream_interval_hands_the_first_token_and_the_end_over_at_once_the_rest_in_groups():
    loop = EngineLoop(_StuckEngine(), stream_interval=3)
    loop._tracked["a"] = Tracked(queue=None, loop=None, arrival=0.0)
    handed = []
    for i in range(9):                 # tokens 0..8, one per step; the last one ends the request
        out = SimpleNamespace(request_id="a", new_token_ids=[i], finish_reason="length" if i == 8 else None)
        outs = loop._hand_over(loop._route(out, 1.0 + i), out)
        if outs:
            handed.append([o.new_token_ids[0] for o in outs])
    assert handed == [[0], [1, 2, 3], [4, 5, 6], [7, 8]]
    every = EngineLoop(_StuckEngine())                 # the default: every output at once
    every._tracked["b"] = Tracked(queue=None, loop=None, arrival=0.0)
    outs = [SimpleNamespace(request_id="b", new_token_ids=[i], finish_reason=None) for i in range(3)]
    assert [every._hand_over(every._route(o, 1.0), o) for o in outs] == [[o] for o in outs]
    with pytest.raises(ValueError, match="`stream_interval` must be"):
        EngineLoop(_StuckEngine(), stream_interval=0)


def test_a_first_token_is_handed_over_before_the_other_streams_next_tokens():
    """The handlers run, and write to their sockets, in the order their queues are filled:
    a step's first tokens go first, whatever the engine's order, and the others keep
    theirs; one step is still one wake-up of the event loop."""
    class EventLoop:
        def __init__(self):
            self.calls = []

        def call_soon_threadsafe(self, fn, items):
            self.calls.append([queue for queue, _ in items])

    event_loop = EventLoop()
    loop = EngineLoop(_StuckEngine())
    for rid in "abcde":
        loop._tracked[rid] = Tracked(queue=rid, loop=event_loop, arrival=0.0)

    def out(rid, n, finish=None):
        return SimpleNamespace(request_id=rid, new_token_ids=[7] * n, finish_reason=finish)
    loop._deliver_step([out("a", 1), out("b", 1)])                           # both first: engine order
    loop._deliver_step([out("a", 1), out("b", 1, "length"), out("c", 1), out("d", 1)])
    loop._deliver_step([out("d", 1), out("e", 0), out("a", 1), out("c", 0, "cancelled")])  # no first token
    loop._deliver_step([out("a", 1), out("e", 1)])                           # e's first token comes now
    assert event_loop.calls == [["a", "b"], ["c", "d", "a", "b"], ["d", "e", "a", "c"], ["e", "a"]]


def test_build_app_checks_its_arguments():
    class NoStep:
        def add_request(self, *a): ...

    with pytest.raises(ValueError, match="without step, abort, has_unfinished, stats"):
        build_app(NoStep(), None)
    from course.batched import ScriptedBatchedModel
    from course.engine import Engine

    engine = Engine(ScriptedBatchedModel(["a", "b"], {(1,): [0]}), None)
    with pytest.raises(ValueError, match="`max_model_len` must be an integer >= 1, got 0."):
        build_app(engine, None, max_model_len=0)
    with pytest.raises(ValueError, match=r"`request_timeout` must be a number in \(0, inf\], got -1."):
        build_app(engine, None, request_timeout=-1)
    with pytest.raises(ValueError, match="`tokenizer` must be None or have encode"):
        build_app(engine, 42)


@pytest.mark.slow
def test_python_m_course_serve_prints_its_url_and_serves(one_thread):
    """What `make serve` runs: the printed URL answers the openai client at once."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen([sys.executable, "-m", "course.serve", "--port", "0", "--threads", "1",
                             "--log-level", "warning"], cwd=Path(__file__).resolve().parent.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Serving tiny-model at http://127.0.0.1:"), line
        base_url = line.split(" at ")[1].split()[0]
        client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
        assert [m.id for m in client.models.list()] == [MODEL]
        answer = client.completions.create(model=MODEL, prompt="12 + 7 =", max_tokens=8, temperature=0)
        assert answer.choices[0].finish_reason == "stop"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_the_engine_process_ends_quietly_when_the_server_is_gone(one_thread, capfd):
    """A server killed in the middle of a generation leaves the engine process sending its
    next step to a pipe nobody reads: it ends as if told to stop (exit code 0), with no
    traceback on the terminal."""
    loop = ProcessEngineLoop(EngineProcess(dict(num_blocks=64, block_size=16, max_batch=2), threads=1))
    loop.launch()                                  # the engine process only: nothing reads its steps
    try:
        loop._conn.send(("add", "r1", [1, 2, 3], RequestParams(temperature=0, max_tokens=900, ignore_eos=True)))
        assert loop._conn.poll(60)                 # it has answered, and is stepping
        time.sleep(0.2)                            # a few steps sent and never read
        loop._conn.close()                         # what the end of the server's process does
        loop._process.join(30)
        assert loop._process.exitcode == 0
        assert "Traceback" not in capfd.readouterr().err
    finally:
        if loop._process.is_alive():
            loop._process.kill()


@pytest.mark.slow
def test_an_engine_in_a_process_of_its_own_serves_the_same(one_thread):
    """EngineProcess (what `python -m course.serve` runs): the same texts as the engine run
    directly, streamed or not, several at once; a closed stream is aborted and its blocks
    freed; the child ends with the server. If the child dies, what is in flight ends with
    an error and new requests get 503, never a hang."""
    tokenizer, context = tiny_tokenizer()
    server = start_background(EngineProcess(dict(num_blocks=256, block_size=16, max_batch=8), threads=1),
                              tokenizer, max_model_len=context)
    loop = server.server.config.app.state.engine_loop
    sent, send = [], loop._send                   # what this process asks of the engine process
    loop._send = lambda msg: (sent.append(msg[0]), send(msg))[1]
    try:
        c = client_for(server.url)
        prompts = list(LAB_PROMPTS[:6])
        expected = direct_texts([encode(tokenizer, p) for p in prompts], temperature=0, max_tokens=40)

        def one(i_prompt):
            i, prompt = i_prompt
            kw = dict(model=MODEL, prompt=prompt, max_tokens=40, temperature=0)
            if i % 2:
                return stream_text(client_for(server.url).completions.create(**kw, stream=True))[:2]
            choice = client_for(server.url).completions.create(**kw).choices[0]
            return choice.text, choice.finish_reason

        with ThreadPoolExecutor(len(prompts)) as pool:
            assert list(pool.map(one, enumerate(prompts))) == expected
        assert metrics(server.url)["course:kv_cache_blocks_used"] == 0
        assert sent == ["add"] * 6                # a request that ended sends no abort after it

        stream = c.completions.create(model=MODEL, prompt="The small cat", max_tokens=900, temperature=0,
                                      stream=True, extra_body={"ignore_eos": True})
        next(iter(stream))
        assert metrics(server.url)["course:num_requests_running"] == 1
        stream.close()
        after = wait_for_metrics(server.url, lambda m: m[CANCELLED] == 1)
        assert after["course:kv_cache_blocks_used"] == 0 and after["course:num_requests_running"] == 0
        assert sent == ["add"] * 7 + ["abort"]

        stream = c.completions.create(model=MODEL, prompt="The small cat", max_tokens=900, temperature=0,
                                      stream=True, extra_body={"ignore_eos": True})
        chunks = iter(stream)
        next(chunks)
        loop._process.kill()
        with pytest.raises(openai.APIError):
            for _ in chunks:
                pass
        with pytest.raises(openai.APIStatusError) as e:
            c.completions.create(model=MODEL, prompt="hi", max_tokens=4)
        assert e.value.status_code == 503
    finally:
        server.stop()
    assert not server.thread.is_alive() and not loop._process.is_alive()
