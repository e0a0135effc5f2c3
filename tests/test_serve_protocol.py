"""course.serve's typed API and its limits on a request body: the models in
course/serve_protocol.py, /openapi.json, and the 400/404/405/408/413 answers in OpenAI's
error shape for bodies that are not JSON-typed, not UTF-8, nested too deep or too large;
and the limits on a request's headers, in time (closed) and size (431).

Fast and without torch: the engine behind the server is a stub that answers every request
with one token. Nothing asserts on time: "the body was not read" is the number of receive()
calls the app made, and "/health answers while a prompt is tokenized" holds the tokenizer
inside encode() until /health has answered.
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import httpx
import pytest

from course.serve import (INLINE_PARSE_BYTES, MAX_BODY_BYTES, MAX_JSON_DEPTH, APIErrorResponse, BackgroundServer,
                          _Answer, build_app, parse_request)
from course.serve_protocol import (ChatCompletionRequest, ChatCompletionStreamResponse, CompletionRequest,
                                   CompletionStreamResponse, ErrorResponse, json_depth_exceeds)

MODEL = "tiny-model"
CONTEXT = 64
ERROR_KEYS = {"message", "type", "param", "code"}


class _Tok:
    """One token per character; 50 of them."""

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 50 for c in text]

    def __len__(self):
        return 50


class _OneTokenEngine:
    """Every request ends after one token, "x", with finish_reason length."""

    def __init__(self):
        self.added, self.n = [], 0

    def add_request(self, prompt_ids, params):
        self.n += 1
        self.added.append(f"r{self.n}")
        return f"r{self.n}"

    def step(self):
        done, self.added = self.added, []
        return [SimpleNamespace(request_id=r, new_token_ids=[1], text_delta="x", finish_reason="length",
                                stop_reason=None, usage=None) for r in done]

    def abort(self, request_id):
        pass

    def has_unfinished(self):
        return bool(self.added)

    def stats(self):
        return {"running": len(self.added), "waiting": 0}


def make_app(tokenizer=None, **kw):
    return build_app(_OneTokenEngine(), tokenizer or _Tok(), max_model_len=CONTEXT, make_params=lambda p: p, **kw)


@pytest.fixture(scope="module")
def url():
    with BackgroundServer(make_app()) as server:
        yield server.url


def assert_openai_error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert set(error) == ERROR_KEYS
    ErrorResponse.model_validate(r.json())
    if code is not None:
        assert error["code"] == code, error
    return error


def post(url: str, content: bytes, content_type: str | None = "application/json", path="/v1/completions"):
    headers = {} if content_type is None else {"content-type": content_type}
    return httpx.post(f"{url}{path}", content=content, headers=headers, timeout=30)


# ---------------------------------------------------------------- bodies the server refuses

def test_a_valid_request_is_answered(url):
    r = httpx.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "ab", "max_tokens": 2.0}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == "x"


@pytest.mark.parametrize("body", [b"[" * 5000, b'{"model": ' + b"[" * 3000 + b"]" * 3000 + b"}",
                                  b'{"model": "tiny-model", "prompt": ' + b"[" * MAX_JSON_DEPTH + b"1" +
                                  b"]" * MAX_JSON_DEPTH + b"}"],
                         ids=["unclosed", "closed", "one-past-the-limit"])
def test_a_deeply_nested_body_is_a_400_in_openai_shape(url, body):
    error = assert_openai_error(post(url, body), 400, "invalid_json")
    assert f"at most {MAX_JSON_DEPTH} deep" in error["message"]


def test_the_depth_limit_skips_brackets_inside_strings():
    assert not json_depth_exceeds(json.dumps({"prompt": "[" * 5000}))
    assert json_depth_exceeds("[" * (MAX_JSON_DEPTH + 1)) and not json_depth_exceeds("[" * MAX_JSON_DEPTH)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "application/json; charset=latin-1"])
def test_a_body_that_is_not_json_typed_is_a_400(url, content_type):
    body = json.dumps({"model": MODEL, "prompt": "ab"}).encode()
    error = assert_openai_error(post(url, body, content_type), 400)
    assert error["code"] in ("invalid_content_type", "invalid_encoding")
    assert repr(content_type) in error["message"]            # it names what it got


def test_json_with_a_charset_or_a_json_suffix_type_is_accepted(url):
    body = json.dumps({"model": MODEL, "prompt": "ab"}).encode()
    assert post(url, body, "application/json; charset=UTF-8").status_code == 200
    assert post(url, body, "application/vnd.api+json").status_code == 200


@pytest.mark.parametrize("body", [b'{"model": "tiny-model", "prompt": "\xff\xfe"}',
                                  '{"model": "tiny-model", "prompt": "é"}'.encode("latin-1")])
def test_a_body_that_is_not_utf8_is_a_400(url, body):
    error = assert_openai_error(post(url, body), 400, "invalid_encoding")
    assert "UTF-8" in error["message"]


@pytest.mark.parametrize("body", [b"{not json", b'{"model": "tiny-model", "prompt": "a", "temperature": NaN}',
                                  b'{"model": "\\ud800", "prompt": "a"}'])
def test_invalid_json_nan_and_lone_surrogates_are_a_400(url, body):
    assert_openai_error(post(url, body), 400, "invalid_json")


def test_a_body_that_is_not_an_object_is_a_400(url):
    error = assert_openai_error(post(url, b"[1, 2]"), 400)
    assert error["message"] == "The request body must be a JSON object, got list."


def test_unknown_path_is_a_404_in_openai_shape(url):
    error = assert_openai_error(httpx.get(f"{url}/v1/nothing-here", timeout=30), 404, "not_found")
    assert "/v1/nothing-here" in error["message"]
    assert_openai_error(post(url, b"{}", path="/v2/completions"), 404, "not_found")


@pytest.mark.parametrize("method, path, allowed", [("GET", "/v1/completions", "POST"),
                                                   ("DELETE", "/v1/chat/completions", "POST"),
                                                   ("POST", "/health", "GET")])
def test_wrong_method_is_a_405_in_openai_shape(url, method, path, allowed):
    r = httpx.request(method, f"{url}{path}", timeout=30)
    error = assert_openai_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == allowed and method in error["message"]


# ---------------------------------------------------------------- size and time, at the ASGI level

def _scope(headers: dict) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/completions", "raw_path": b"/v1/completions", "query_string": b"", "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000), "state": {}}


def call_asgi(app, headers: dict, parts) -> tuple[int, dict, int]:
    """Run one request through the app: (status, JSON body, receive() calls made).
    `parts` yields the body's parts; receive() past the last one waits for ever."""
    parts, sent, calls = iter(parts), [], [0]

    async def receive():
        calls[0] += 1
        part = next(parts, None)
        if part is None:
            await asyncio.Event().wait()            # a client that sends no more
        return {"type": "http.request", "body": part, "more_body": True}

    async def send(message):
        sent.append(message)

    asyncio.run(app(_scope(headers), receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), calls[0]


def _endless(size: int = 64 * 1024):
    head = b'{"model": "tiny-model", "prompt": "'
    yield head
    while True:
        yield b"a" * size


def test_an_oversized_content_length_is_refused_before_reading_the_body():
    status, body, calls = call_asgi(make_app(), {"content-type": "application/json",
                                                 "content-length": str(20_000_000)}, _endless())
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert calls == 0                               # not one part of the body was read
    assert "20000000" in body["error"]["message"] and str(MAX_BODY_BYTES) in body["error"]["message"]


@pytest.mark.parametrize("headers", [{}, {"content-length": "100"}], ids=["no-length", "a-length-that-lies"])
def test_a_body_past_the_limit_is_refused_while_it_streams(headers):
    limit = 256 * 1024
    status, body, calls = call_asgi(make_app(max_body_bytes=limit), {"content-type": "application/json", **headers},
                                    _endless(64 * 1024))
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert calls == limit // (64 * 1024) + 1        # it stopped at the part that passed the limit


def test_a_body_shorter_than_its_content_length_is_timed_out():
    status, body, calls = call_asgi(make_app(body_read_timeout=0.05),
                                    {"content-type": "application/json", "content-length": "1000"},
                                    [b'{"model": '])
    assert status == 408 and body["error"]["code"] == "request_timeout"
    assert calls == 2                               # the part it sent, then the wait that timed out


# ---------------------------------------------------------------- tokenizing off the event loop

class _HeldTokenizer(_Tok):
    """encode() waits until the test releases it, and records whether it ran on the event loop."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()
        self.on_event_loop = None

    def encode(self, text, add_special_tokens=False):
        try:
            asyncio.get_running_loop()
            self.on_event_loop = True
        except RuntimeError:
            self.on_event_loop = False
        self.entered.set()
        assert self.release.wait(30), "the test never released encode()"
        return super().encode(text[:8])


def test_health_answers_while_a_large_prompt_is_tokenized():
    tok = _HeldTokenizer()
    with BackgroundServer(make_app(tok)) as server, ThreadPoolExecutor(1) as pool:
        big = {"model": MODEL, "prompt": "a" * (MAX_BODY_BYTES // 2), "max_tokens": 1}
        answer = pool.submit(httpx.post, f"{server.url}/v1/completions", json=big, timeout=60)
        try:
            assert tok.entered.wait(30), "encode() was never called"
            # encode() is held: an event loop running it could not answer this at all.
            health = httpx.get(f"{server.url}/health", timeout=30)
            assert health.status_code == 200 and health.json()["status"] == "ok"
        finally:
            tok.release.set()
        assert answer.result().status_code == 200
    assert tok.on_event_loop is False


# ---------------------------------------------------------------- the models and the schema

def openapi_of(app) -> dict:
    return app.openapi()


def test_openapi_describes_every_request_field_with_its_bounds():
    spec = openapi_of(make_app())
    schemas = spec["components"]["schemas"]
    for route, model in (("/v1/completions", CompletionRequest), ("/v1/chat/completions", ChatCompletionRequest)):
        body = spec["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{model.__name__}"}
        assert set(schemas[model.__name__]["properties"]) == set(model.model_fields)
        assert schemas[model.__name__]["additionalProperties"] is False
    props = schemas["CompletionRequest"]["properties"]

    def variant(name: str) -> dict:                 # the non-null branch of an optional field
        p = props[name]
        return next(v for v in p.get("anyOf", [p]) if v.get("type") != "null")

    assert props["model"]["enum"] == [MODEL]
    assert variant("temperature") == {"type": "number", "minimum": 0, "maximum": 2}
    assert variant("top_p") == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert variant("max_tokens") == {"type": "integer", "minimum": 1, "maximum": CONTEXT - 1}
    assert variant("n") == {"type": "integer", "minimum": 1, "maximum": 1}
    assert variant("seed") == {"type": "integer", "minimum": -2 ** 63, "maximum": 2 ** 63 - 1}
    assert variant("echo")["enum"] == [False]
    assert variant("logit_bias")["maxProperties"] == 0
    assert {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 16} in props["stop"]["anyOf"]
    token_ids = next(v for v in props["prompt"]["anyOf"] if v.get("items", {}).get("type") == "integer")
    assert token_ids["items"] == {"type": "integer", "minimum": 0, "maximum": len(_Tok()) - 1}
    chat = schemas["ChatCompletionRequest"]["properties"]
    assert chat["messages"]["minItems"] == 1
    assert schemas["ChatMessageParam"]["properties"]["role"]["enum"] == ["user", "assistant"]
    # pydantic's own names never leak into the schema in place of JSON Schema's
    assert not any(f'"{k}"' in json.dumps(schemas) for k in ("ge", "gt", "le", "lt"))


def test_openapi_describes_answers_errors_and_the_finish_reasons():
    spec = openapi_of(make_app())
    schemas = spec["components"]["schemas"]
    for route, answer in (("/v1/completions", "CompletionResponse"),
                          ("/v1/chat/completions", "ChatCompletionResponse")):
        responses = spec["paths"][route]["post"]["responses"]
        assert responses["200"]["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{answer}"}
        assert "text/event-stream" in responses["200"]["content"]
        for status in ("400", "404", "408", "413", "429", "500", "503"):
            assert responses[status]["content"]["application/json"]["schema"] == \
                {"$ref": "#/components/schemas/ErrorResponse"}, status
    reasons = ["stop", "length", "cancelled", "timeout", "content_filter"]
    for choice in ("CompletionResponseChoice", "ChatCompletionResponseChoice", "ChatCompletionResponseStreamChoice"):
        finish = schemas[choice]["properties"]["finish_reason"]
        assert [v for v in finish["anyOf"] if "enum" in v][0]["enum"] == reasons, choice
    assert set(schemas["ErrorInfo"]["properties"]) == ERROR_KEYS


async def _sse(kind: str, include_usage: bool) -> list[dict]:
    answer, queue = _Answer(kind, "r1", MODEL, 3), asyncio.Queue()
    for text, reason in (("a", None), ("b", "stop")):
        queue.put_nowait(SimpleNamespace(new_token_ids=[1], text_delta=text, finish_reason=reason,
                                         stop_reason="." if reason else None, usage=None))
    events = "".join([e async for e in answer.sse(queue, include_usage)]).split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    return [json.loads(e[len("data: "):]) for e in events[:-2]]


@pytest.mark.parametrize("kind, model", [("completion", CompletionStreamResponse),
                                         ("chat", ChatCompletionStreamResponse)])
def test_every_stream_chunk_is_an_instance_of_its_model(kind, model):
    for include_usage in (False, True):
        chunks = asyncio.run(_sse(kind, include_usage))
        for chunk in chunks:
            assert model.model_validate(chunk).model_dump(exclude_unset=True) == chunk
        assert (chunks[-1].get("usage") is not None) == include_usage


def test_outputs_waiting_together_go_out_as_one_chunk_in_one_write():
    async def run():
        answer, queue = _Answer("completion", "r1", MODEL, 3), asyncio.Queue()
        stream = answer.sse(queue, False)
        pieces = []
        queue.put_nowait(SimpleNamespace(new_token_ids=[1], text_delta="a", finish_reason=None, usage=None))
        pieces.append(await anext(stream))             # one output waiting: one chunk
        for text, reason in (("b", None), ('"c', None), ("d", "stop")):
            queue.put_nowait(SimpleNamespace(new_token_ids=[1], text_delta=text, finish_reason=reason,
                                             stop_reason="." if reason else None, usage=None))
        pieces += [p async for p in stream]            # three waiting: one write
        return answer, pieces

    answer, pieces = asyncio.run(run())
    assert len(pieces) == 2
    events = [e[len("data: "):] for e in pieces[1].split("\n\n") if e]
    assert events[-1] == "[DONE]"
    texts = [json.loads(e)["choices"][0]["text"] for e in [pieces[0][len("data: "):]] + events[:-1]]
    assert texts == ["a", 'b"cd', ""]                 # the joined text, then the finish chunk
    # a text chunk is byte for byte what encoding the whole chunk would give
    assert pieces[0] == answer._chunk([answer._choice("a", None, None)])
    assert json.loads(events[1])["choices"][0]["finish_reason"] == "stop"


def _closed_by_server(sock, probe: bytes = b"X: y\r\n", within: float = 30,
                      between: Callable[[], None] = lambda: None) -> bool:
    """Keep sending header lines (never the blank line that ends them), calling `between`
    before each, until the server closes the connection; False if it is still open after
    `within` seconds."""
    import socket
    import time

    deadline = time.monotonic() + within               # generous: only "eventually" is asserted
    while time.monotonic() < deadline:
        between()
        try:
            sock.sendall(probe)
            if sock.recv(1) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:                                # reset: closed as well
            return True
    return False


def test_a_connection_that_sends_its_headers_too_slowly_is_closed():
    import socket

    def others_are_served():
        assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200

    with BackgroundServer(make_app(), header_timeout=0.5) as server:
        slow = socket.create_connection((server.host, server.port), timeout=1.0)
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        try:
            closed = _closed_by_server(slow, between=others_are_served)
        finally:
            slow.close()
        assert closed, "a connection sending header lines for 30 s was never closed"
        with httpx.Client(base_url=server.url) as client:     # keep-alive requests are unaffected
            assert [client.get("/health").status_code for _ in range(3)] == [200] * 3


def _read_answers(sock, n: int, marker: bytes) -> bytes:
    """Read until `marker` (a piece of each answer's body) has arrived n times."""
    got = b""
    while got.count(marker) < n:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {got.count(marker)} of {n} answers: {got[-300:]!r}"
        got += chunk
    return got


def test_the_header_deadline_spares_requests_being_served_and_pipelined_ones():
    """The deadline is on the headers only: a request whose handler is still at work when
    another connection's deadline has passed is answered, two pipelined requests are both
    answered, and after its response a connection is again given the deadline for its
    next headers. No timing is asserted: the held request's connection was opened before
    the probe's, so its deadline, if it had one, would have fired first."""
    import socket

    tok = _HeldTokenizer()
    with BackgroundServer(make_app(tok), header_timeout=0.5) as server, ThreadPoolExecutor(1) as pool:
        big = {"model": MODEL, "prompt": "a" * (INLINE_PARSE_BYTES * 2), "max_tokens": 1}
        held = pool.submit(httpx.post, f"{server.url}/v1/completions", json=big, timeout=60)
        try:
            assert tok.entered.wait(30), "encode() was never called"
            probe = socket.create_connection((server.host, server.port), timeout=1.0)
            probe.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            try:
                assert _closed_by_server(probe), "a connection sending header lines for 30 s was never closed"
            finally:
                probe.close()
        finally:
            tok.release.set()
        assert held.result().status_code == 200

        sock = socket.create_connection((server.host, server.port), timeout=30)
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 2)     # pipelined
            assert _read_answers(sock, 2, b'"status"').count(b"HTTP/1.1 200 OK") == 2
            sock.settimeout(1.0)
            sock.sendall(b"GET /health HTTP/1.1\r\n")                       # the next one, never finished
            assert _closed_by_server(sock), "a kept-alive connection dribbling headers was never closed"
        finally:
            sock.close()


def _answer_to(sock) -> bytes:
    """What the server sends before it closes the connection."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def _send_until_refused(sock, data: bytes, most: int) -> int:
    """Send `data` over and over, up to `most` bytes; the bytes sent before the server
    closed the connection."""
    sent = 0
    try:
        while sent < most:
            sock.sendall(data)
            sent += len(data)
    except OSError:
        pass
    return sent


def test_headers_past_the_size_limit_are_a_431_and_the_connection_is_closed():
    """On a new connection, and on one whose previous request is still being answered
    (the next request's headers arrive meanwhile); bodies and pipelined requests of any
    size are not headers and are not counted."""
    import socket

    from course.serve import MAX_HEADER_BYTES

    pad = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    tok = _HeldTokenizer()
    with BackgroundServer(make_app(tok)) as server:
        fresh = socket.create_connection((server.host, server.port), timeout=30)
        with fresh:
            fresh.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            sent = _send_until_refused(fresh, pad, 100 * MAX_HEADER_BYTES)
            assert sent < 100 * MAX_HEADER_BYTES, "100 times the limit of headers were read"
            assert _answer_to(fresh).startswith(b"HTTP/1.1 431 ")

        busy = socket.create_connection((server.host, server.port), timeout=30)
        with busy:
            body = json.dumps({"model": MODEL, "prompt": "a" * (INLINE_PARSE_BYTES * 2), "max_tokens": 1}).encode()
            busy.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert tok.entered.wait(30), "encode() was never called"      # the answer is held
            busy.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            sent = _send_until_refused(busy, pad, 100 * MAX_HEADER_BYTES)
            tok.release.set()
            assert sent < 100 * MAX_HEADER_BYTES, "100 times the limit of headers were read"
            assert b"HTTP/1.1 431 " in _answer_to(busy)

        with socket.create_connection((server.host, server.port), timeout=30) as sock:
            big = json.dumps({"model": MODEL, "prompt": "b", "max_tokens": 1, "user": "u" * (MAX_BODY_BYTES // 2)})
            one = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(big), big.encode()))
            sock.sendall(one * 3)                                           # pipelined, 1.5 MiB in all
            assert _read_answers(sock, 3, b'"text_completion"').count(b"HTTP/1.1 200 OK") == 3


class _Transport:
    """Enough of an asyncio transport for uvicorn's protocol: what it writes, and whether
    it closed."""

    def __init__(self):
        self.written, self.closed = b"", False

    def get_extra_info(self, name, default=None):
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data):
        self.written += data

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def test_the_header_size_is_counted_as_parsed_and_read_by_read():
    """The protocol fed by hand, read by read. Headers are counted as they are parsed, so
    one read holding a whole request is judged by its headers alone; a read that ends one
    request's body and begins the next request's headers does not count as headers,
    however large; reads that are all headers do (one endless header)."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from course.serve import guarded_http

    limit = 4096
    protocol_class = guarded_http(max_header_bytes=limit)
    config = Config(app=make_app(), http=protocol_class)
    config.load()
    loop = asyncio.new_event_loop()
    try:
        def connection():
            protocol = protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
            protocol.connection_made(transport := _Transport())
            return protocol, transport

        body = b"{" + b" " * (3 * limit) + b"}"
        protocol, transport = connection()
        protocol.data_received(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        protocol.data_received(body[10:] + b"GET /health HTTP/1.1\r\nHost: x\r\n")   # > limit, one read
        protocol.data_received(b"X: y\r\n\r\n")
        assert not transport.closed and transport.written == b""

        for size, refused in ((limit - 100, False), (limit + 1, True)):     # one read, one request
            protocol, transport = connection()
            protocol.data_received(b"GET /health HTTP/1.1\r\nX: " + b"a" * size + b"\r\n\r\n")
            assert transport.closed == refused
            assert transport.written.startswith(b"HTTP/1.1 431 ") == refused

        protocol, transport = connection()
        protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        for _ in range(limit // 100 + 1):
            protocol.data_received(b"a" * 100)                            # one header that never ends
        assert transport.closed and transport.written.startswith(b"HTTP/1.1 431 ")
    finally:
        tasks = asyncio.all_tasks(loop)                  # the requests' handlers, never run: end them
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()


def test_every_connection_sends_without_delay():
    """TCP_NODELAY on the server's side of each connection: with Nagle's algorithm on, a
    stream's first event waits for the client to acknowledge the response headers. asyncio
    sets it only when the listening socket, which the server binds itself, has proto
    IPPROTO_TCP."""
    import socket

    with BackgroundServer(make_app()) as server, httpx.Client(base_url=server.url) as client:
        assert client.get("/health").status_code == 200           # the connection stays open
        connections = list(server.server.server_state.connections)
        assert connections
        for protocol in connections:
            sock = protocol.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_small_and_large_bodies_are_parsed_alike():
    """A body up to INLINE_PARSE_BYTES is parsed on the event loop, a larger one in a worker
    thread: the same answer and the same errors either way."""
    from course.serve import INLINE_PARSE_BYTES

    seen = []
    with BackgroundServer(make_app()) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for pad in (0, INLINE_PARSE_BYTES):
            extra = {"user": "u" * pad}                        # makes the body larger, changes nothing else
            body = {"model": MODEL, "prompt": "ab", "max_tokens": 3, **extra}
            assert (len(json.dumps(body)) > INLINE_PARSE_BYTES) == (pad > 0)
            answer = client.post("/v1/completions", json=body)
            assert answer.status_code == 200
            bad = client.post("/v1/completions", json={**body, "temperature": 9})
            assert bad.status_code == 400
            seen.append((answer.json()["choices"], answer.json()["usage"], bad.json()))
    assert seen[0] == seen[1]
    assert seen[0][2]["error"]["param"] == "temperature"


# ---------------------------------------------------------------- the checks and their words

def parse(body: dict, kind: str = "completion"):
    return parse_request(body, kind, _Tok(), model_name=MODEL, max_model_len=CONTEXT, vocab_size=50)


def reject(body: dict, kind: str = "completion") -> APIErrorResponse:
    with pytest.raises(APIErrorResponse) as e:
        parse(body, kind)
    return e.value


def test_integers_are_json_schema_integers():
    p = parse({"model": MODEL, "prompt": [1.0, 2], "max_tokens": 3.0, "seed": 7.0, "n": 1.0})
    assert p.prompt_ids == [1, 2] and p.params["max_tokens"] == 3 and p.params["seed"] == 7
    assert type(p.params["max_tokens"]) is int
    for value in (True, 1.5, "3"):
        err = reject({"model": MODEL, "prompt": "ab", "max_tokens": value})
        assert err.param == "max_tokens" and err.message == f"`max_tokens` must be an integer >= 1, got {value!r}."


def test_a_temperature_near_zero_is_greedy():
    """As in vLLM: dividing logits by 4e-109 would overflow them to inf."""
    assert parse({"model": MODEL, "prompt": "ab", "temperature": 4e-109}).params["temperature"] == 0.0
    assert parse({"model": MODEL, "prompt": "ab", "temperature": 1e-3}).params["temperature"] == 1e-3


def test_errors_name_the_parameter_and_its_value_in_the_course_template():
    cases = [
        ({"temperature": 2.5}, "temperature", "`temperature` must be a number in [0.0, 2.0], got 2.5."),
        ({"top_p": 0}, "top_p", "`top_p` must be a number in (0.0, 1.0], got 0."),
        ({"n": 2}, "n", "`n` must be 1 (one choice per request), got 2."),
        ({"echo": True}, "echo", "`echo` must be false (echo is not supported), got True."),
        ({"stream_options": {"include_usage": True}}, "stream_options",
         "`stream_options` is only allowed when `stream` is true, got {'include_usage': True}."),
        ({"frobnicate": 1}, "frobnicate", "Unrecognized request argument supplied: `frobnicate`."),
        ({"prompt": "a" * CONTEXT}, "prompt", f"`prompt` must be at most {CONTEXT - 1} tokens (the model's "
                                              f"context is {CONTEXT}), got {CONTEXT} tokens."),
        ({"prompt": [49, 50]}, "prompt", "`prompt` token ids must be in [0, 50), got 50."),
        ({"model": "x" * 500}, "model", None),
    ]
    for extra, param, message in cases:
        err = reject({"model": MODEL, "prompt": "ab", **extra})
        assert err.param == param, (extra, err.message)
        if message is not None:
            assert err.message == message
        assert len(err.message) < 200                  # a long value is cut, never echoed whole
    err = reject({"model": MODEL, "messages": [{"role": "user", "content": "hi"}, 3]}, "chat")
    assert (err.param, err.message) == ("messages[1]", "`messages[1]` must be an object with role and content, got 3.")
    err = reject({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image"}]}]}, "chat")
    assert err.param == "messages[0].content"


class _SpelledTokenizer(_Tok):
    """Tokens spelled out, at most 4 characters each, no normalizer; encode() is counted."""
    backend_tokenizer = SimpleNamespace(normalizer=None)

    def __init__(self):
        self.encoded = 0

    def convert_ids_to_tokens(self, ids):
        return ["abcd" if i == 7 else "a" for i in ids]

    def encode(self, text, add_special_tokens=False):
        self.encoded += 1
        return super().encode(text)


def test_a_text_too_long_for_the_context_is_refused_without_tokenizing_it():
    from course.serve import max_chars_per_token

    tok = _SpelledTokenizer()
    assert max_chars_per_token(tok) == 4 and max_chars_per_token(_Tok()) is None
    with BackgroundServer(make_app(tok)) as server:
        # 4 * 63 + 1 characters need at least 64 tokens: more than the prompt may have
        r = httpx.post(f"{server.url}/v1/completions", json={"model": MODEL, "prompt": "a" * (4 * 63 + 1)}, timeout=30)
        error = assert_openai_error(r, 400)
        assert error["param"] == "prompt" and "got at least 64 tokens (253 characters)" in error["message"]
        assert tok.encoded == 0
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "a" * 300}]}
        assert assert_openai_error(httpx.post(f"{server.url}/v1/chat/completions", json=chat, timeout=30),
                                   400)["param"] == "messages"
        assert tok.encoded == 0
        ok = httpx.post(f"{server.url}/v1/completions", json={"model": MODEL, "prompt": "ab", "max_tokens": 1},
                        timeout=30)
        assert ok.status_code == 200 and tok.encoded == 1
