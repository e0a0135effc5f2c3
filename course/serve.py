"""Serve an engine over an OpenAI-compatible HTTP API (FastAPI on uvicorn).

    python -m course.serve                      # or: make serve; prints the base URL
    python -m course.serve --port 0 --max-batch 8

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    client.completions.create(model="tiny-model", prompt="The small cat", max_tokens=8)

Endpoints
    POST /v1/completions, POST /v1/chat/completions   (stream=true: server-sent events)
    GET  /v1/models, GET /health, GET /metrics         (Prometheus text format)

The API is typed: course/serve_protocol.py holds every request and response body as a
pydantic model with its bounds, and /openapi.json publishes them (the schema is the
documentation; `make e2e` fuzzes the live server with schemathesis from it).

Limits on a request body, each answered in OpenAI's error shape before the engine sees it:
    Content-Type     application/json (or a +json type), charset UTF-8 if one is named;
                     anything else is 400
    size             MAX_BODY_BYTES = 1 MiB (build_app's max_body_bytes): a larger
                     Content-Length is 413 before one byte of the body is read; without
                     one (chunked), reading stops with 413 as soon as the limit is passed
    read timeout     BODY_READ_TIMEOUT_S = 10 s without a new part of the body (a client
                     that sends less than its Content-Length) is 408; uvicorn then closes
                     the connection after its keep-alive timeout
    encoding         not UTF-8, or an escaped lone surrogate: 400
    nesting          arrays and objects deeper than MAX_JSON_DEPTH = 32: 400, checked
                     before parsing (valid requests nest 5 deep)
    JSON             invalid JSON, NaN or Infinity, or not an object: 400
Unknown paths answer 404 and wrong methods 405 (with Allow), in the same shape.

How a request flows. The handler reads the body within those limits, then parses it,
checks it against the request model (400 naming the parameter and the value, in OpenAI's
error shape) and turns the prompt into token ids. A body of at most INLINE_PARSE_BYTES
(4 KiB) is handled in place, on the event loop: that takes well under a millisecond,
and a hop to a worker thread and back cost a new request several milliseconds of its
time to first token when 16 streams were busy. A larger body goes to a worker thread
(anyio.to_thread), so a large prompt never stalls the event loop, /health or other
streams. A text longer than the context could hold even at the tokenizer's longest
token is refused without tokenizing it (max_chars_per_token). Every connection sends
without delay (TCP_NODELAY, see _bind).
The handler then hands `add_request` to ONE background thread, the engine loop. That
thread owns the engine: it runs queued commands (add, abort), calls `engine.step()`, and
routes every RequestOutput to the asyncio queue of its request. The handler reads its
queue and writes SSE chunks (`data: {...}` ... `data: [DONE]`) or one JSON body.
`python -m course.serve` runs the engine in a process of its own instead (EngineProcess,
ProcessEngineLoop; `--engine thread` keeps it in a thread), as vLLM runs its engine core
apart from its API server: the child runs the commands and steps, and sends each step's
outputs in one message to a thread here that routes them the same way.
Overload (the engine's waiting queue is full: QueueFull) answers 429 with Retry-After at
once, never a hang; a request that can never run (RequestRefused, raised by add_request:
its prompt + max_tokens could not fit the KV pool even alone) answers 400 naming
max_tokens at once, since retrying could not help. A client that closes its stream
aborts the request: the abort is the next command the loop runs, before its next step,
and the engine frees the blocks inside abort(), so the request's KV blocks are back in
the pool within one step.

What a streamed token costs. Each token crosses from the engine to the event loop and
becomes an SSE event the client parses; on a small model that Python work is of the
order of a decode step itself. In one process the engine thread and the event loop share
one interpreter lock, and every socket write hands it over and has to win it back from a
step in progress, so the two never run at once and the hand-overs cost more wall time
than the work; hence the engine process of the command line. The work is also done in
bulk where the wire format allows: one wake-up of the event loop per engine
step for all the requests it advanced; a chunk's JSON is encoded once per request and
only the text is encoded per event; the outputs a stream finds waiting are joined into
one chunk and all its ready events go out in one socket write; a step's first tokens are
handed over before the other streams' next tokens, so a new stream's first event is
written, and read by a client of many streams, first. `stream_interval` (vLLM's
--stream-interval; default 1) hands a stream's tokens over in groups of that many after
the first one, which always goes at once: fewer, longer chunks, the same text.
benchmarks/bench_http.py measures the cost against the engine driven directly.

Slow clients. A connection must finish sending a request's headers within
HEADER_TIMEOUT_S = 10 s of opening (or of its previous response ending), or it is
closed: uvicorn's own keep-alive timer starts only after a first response and stops at
the first byte, so without this a client dribbling header bytes would hold a connection
(and its memory) for ever. A request line and headers of more than MAX_HEADER_BYTES =
32 KiB are answered 431 and the connection is closed.

Finish reasons on the wire. The course's FinishReason values are OpenAI's where OpenAI
has one and pass through unchanged otherwise:
    stop            stop (EOS, a stop string, a stop token id; `stop_reason` says which)
    length          length (max_tokens reached; prompt + max_tokens never exceeds the context)
    content_filter  content_filter
    cancelled       "cancelled": the request was aborted; a client that disconnected never
                    sees it, but /metrics counts it (under vLLM's label "abort", see below)
    timeout         "timeout": the server's per-request deadline (--request-timeout) passed
    error           no finish_reason: a non-streamed request gets HTTP 500 in the error
                    shape; a stream gets an SSE `error` event, which the openai client
                    raises as openai.APIError
Extensions accepted as in vLLM (openai client: `extra_body={...}`): top_k, ignore_eos,
stop_token_ids. Each choice also carries vLLM's `stop_reason`.

Metrics. Where /metrics shows a metric vLLM also has, it uses vLLM's name (vLLM v1,
vllm/v1/metrics/loggers.py) under the prefix `course:` instead of `vllm:`, and vLLM's
bucket boundaries, so a vLLM dashboard reads it with the prefix changed:
    course:num_requests_running, course:num_requests_waiting, course:kv_cache_usage_perc,
    course:num_preemptions_total, course:prompt_tokens_total, course:generation_tokens_total
    course:request_success_total{finished_reason}
        one per ended request; the label is vLLM's for stop, length and "abort" (a
        cancelled request) and the course's own name for timeout, content_filter, error
    course:time_to_first_token_seconds      arrival -> first token, one per request
    course:inter_token_latency_seconds      ITL: each gap between two tokens of a request
        (when one step delivers k tokens, the gap since the previous delivery is split
        into k equal observations)
    course:request_time_per_output_token_seconds
        TPOT: one per ended request with at least two tokens, (last token - first token)
        / (tokens - 1), which is (e2e - TTFT) / (tokens - 1) when the request ends with its
        last token; a one-token request has no TPOT and is not observed (vLLM observes 0)
    course:e2e_request_latency_seconds      arrival -> the request ended, one per request
ITL and TPOT are different distributions: a request with 100 tokens adds 99 ITL samples
and one TPOT sample, so the ITL histogram weighs requests by their length and TPOT's
counts each request once, and the P99 of one is not the P99 of the other (Lab 06 works
an example).
The course's own metrics, which vLLM does not have:
    course:kv_cache_blocks_used, course:kv_cache_blocks_total   (KV blocks in the pool)
    course:requests_rejected_total{reason}   answered with an error before reaching the
        engine: invalid, queue_full, refused, shutdown, error
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import operator
import secrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError

from ._checks import check_int, check_number, check_optional, check_type
from .serve_protocol import (DEFAULT_COMPLETION_MAX_TOKENS, MAX_BODY_BYTES, MAX_JSON_DEPTH,  # noqa: F401
                             MAX_STOP_STRINGS, ChatCompletionRequest, ChatCompletionResponse,
                             ChatCompletionResponseChoice, ChatMessage, CompletionRequest, CompletionResponse,
                             CompletionResponseChoice, CompletionStreamResponse, ChatCompletionStreamResponse,
                             ErrorResponse, HealthResponse, ModelList, UsageInfo, explain, json_depth_exceeds,
                             request_schemas, short, sse_event_schema)

MODEL_NAME = "tiny-model"
# A body whose next part does not arrive within this many seconds is answered 408 (a client
# that sends less than its Content-Length must not hold a request open for ever).
BODY_READ_TIMEOUT_S = 10.0
# A connection that has not sent a request's complete headers this many seconds after it
# opened (or after its previous response ended) is closed (see guarded_http).
HEADER_TIMEOUT_S = 10.0
# A request line and headers larger than this are answered 431 and the connection closed
# (httptools, unlike h11, sets no limit of its own; see guarded_http).
MAX_HEADER_BYTES = 32 * 1024
# A body of at most this many bytes is parsed and tokenized on the event loop; a larger one in
# a worker thread (see "How a request flows" above).
INLINE_PARSE_BYTES = 4096
# A temperature below this samples greedily, as in vLLM (its _SAMPLING_EPS): dividing logits
# by a temperature near zero overflows to inf instead of approaching argmax.
GREEDY_BELOW = 1e-5

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py), seconds; TPOT_BUCKETS serve both the
# inter-token latency and the per-request TPOT histograms, as in vLLM.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
               120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ENGINE_METHODS = ("add_request", "step", "abort", "has_unfinished", "stats")
FINISH_REASONS = ("stop", "length", "cancelled", "timeout", "content_filter", "error")
# finished_reason labels on /metrics: vLLM's name where vLLM has the ending, ours otherwise
METRIC_FINISH_LABELS = {"cancelled": "abort"}
# How long the engine loop waits for the next command when the engine has unfinished
# requests but nothing it can run (seconds): short, so deadlines are still checked.
IDLE_WAIT_S = 0.05


# ---------------------------------------------------------------- errors in OpenAI's shape

class APIErrorResponse(Exception):
    """An error the client should see: HTTP status + OpenAI's error object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.retry_after = retry_after

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict:
        # 429/503 may be retried (after Retry-After); anything else would fail again.
        if self.retry_after is not None:
            return {"retry-after": str(self.retry_after)}
        return {"x-should-retry": "false"}


def invalid(param: str, message: str) -> APIErrorResponse:
    """HTTP 400 naming the parameter; `message` follows the course template."""
    return APIErrorResponse(400, message, param=param, code="invalid_value")


# ---------------------------------------------------------------- request checks

@dataclass
class ParsedRequest:
    """A checked request: what the engine gets and how to answer."""
    prompt_ids: list[int]
    params: dict
    stream: bool
    include_usage: bool
    model: str


def check_content_type(content_type: str | None) -> None:
    """400 unless the body is declared JSON (application/json, or a `+json` type) in UTF-8."""
    media, _, rest = (content_type or "").partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise APIErrorResponse(400, f"The request body must be JSON: Content-Type must be application/json, "
                                    f"got {short(content_type)}.", code="invalid_content_type")
    for param in rest.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise APIErrorResponse(400, f"The request body must be UTF-8, got a Content-Type of "
                                        f"{short(content_type)}.", code="invalid_encoding")


def parse_body(raw: bytes):
    """The bytes of a request body -> its JSON value; 400 in OpenAI's shape unless they
    are UTF-8, nest at most MAX_JSON_DEPTH deep and are valid JSON (RFC 8259: no NaN)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise APIErrorResponse(400, f"The request body must be UTF-8, got the byte {raw[exc.start]:#04x} at "
                                    f"position {exc.start}.", code="invalid_encoding") from None
    if json_depth_exceeds(text):
        raise APIErrorResponse(400, f"The request body must nest arrays and objects at most {MAX_JSON_DEPTH} "
                                    "deep.", code="invalid_json")
    try:
        value = json.loads(text, parse_constant=_no_constant)
        if "\\u" in text:                 # an escaped lone surrogate is not text (nor printable in a reply)
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError) as exc:
        where = f" ({exc.msg} at character {exc.pos})" if isinstance(exc, json.JSONDecodeError) else ""
        raise APIErrorResponse(400, f"The body must be valid JSON{where}.", code="invalid_json") from None
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def render_chat(messages) -> str:
    """The tiny model's prompt format as a chat template.

    The model was trained on single turns "User: <request>\\nCall: <answer><|endoftext|>",
    so each user message becomes "User: {content}\\nCall: ", each earlier assistant
    message "{content}<|endoftext|>", and the last message must be the user's.
    """
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", f"`messages` must be a non-empty list of messages, got {short(messages)}.")
    parts = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise invalid(f"messages[{i}]", f"`messages[{i}]` must be an object with role and content, "
                                            f"got {short(m)}.")
        role, content = m.get("role"), m.get("content")
        if role not in ("user", "assistant"):
            raise invalid(f"messages[{i}].role",
                          f"`messages[{i}].role` must be 'user' or 'assistant' (the tiny model has no "
                          f"system prompt), got {short(role)}.")
        if isinstance(content, list):   # content parts: text only
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise invalid(f"messages[{i}].content",
                              f"`messages[{i}].content` must be a string or a list of text parts, "
                              f"got {short(content)}.")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise invalid(f"messages[{i}].content",
                          f"`messages[{i}].content` must be a string or a list of text parts, got {short(content)}.")
        parts.append(f"User: {content}\nCall: " if role == "user" else f"{content}<|endoftext|>")
    if messages[-1].get("role") != "user":
        raise invalid("messages", "`messages` must end with a user message, got a last role of "
                                  f"{short(messages[-1].get('role'))}.")
    return "".join(parts)


def parse_request(body, kind: str, tokenizer, *, model_name: str, max_model_len: int,
                  vocab_size: int | None = None, request_timeout: float | None = None,
                  max_token_chars: int | None = None) -> ParsedRequest:
    """Check an OpenAI request body (kind "completion" or "chat") against its model in
    course.serve_protocol and turn it into prompt ids + engine parameters. Raises
    APIErrorResponse (400, or 404 for an unknown model) naming the first bad parameter
    and its value. Tokenizes: the server calls it off the event loop. max_token_chars
    (see max_chars_per_token): a text too long to fit the context in tokens is refused
    without tokenizing it."""
    if not isinstance(body, dict):
        raise APIErrorResponse(400, f"The request body must be a JSON object, got {type(body).__name__}.")
    schema = CompletionRequest if kind == "completion" else ChatCompletionRequest
    try:
        req = schema.model_validate(body)
    except ValidationError as exc:
        raise invalid(*explain(exc, schema, body)) from None
    if req.model != model_name:
        raise APIErrorResponse(404, f"The model `{short(req.model)[1:-1]}` does not exist; this server serves "
                                    f"`{model_name}`.", param="model", code="model_not_found")

    # -- the prompt
    if kind == "completion":
        prompt, prompt_param = req.prompt, "prompt"
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]            # a batch of one is one prompt
        if isinstance(prompt, str):
            prompt_ids = _encode(tokenizer, prompt, "prompt", max_model_len, max_token_chars)
        else:
            bad = [t for t in prompt if vocab_size is not None and t >= vocab_size]
            if bad:
                raise invalid("prompt", f"`prompt` token ids must be in [0, {vocab_size}), got {bad[0]!r}.")
            prompt_ids = list(prompt)
        max_tokens = DEFAULT_COMPLETION_MAX_TOKENS if req.max_tokens is None else req.max_tokens
    else:
        prompt_param = "messages"
        prompt_ids = _encode(tokenizer, render_chat(body["messages"]), "messages", max_model_len, max_token_chars)
        if req.max_tokens is not None and req.max_completion_tokens is not None:
            raise invalid("max_completion_tokens", "Give `max_tokens` or `max_completion_tokens`, not both.")
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        if max_tokens is None:          # as in vLLM: whatever the context has left
            max_tokens = max(1, max_model_len - len(prompt_ids))

    if len(prompt_ids) >= max_model_len:
        raise invalid(prompt_param, f"`{prompt_param}` must be at most {max_model_len - 1} tokens (the model's "
                                    f"context is {max_model_len}), got {len(prompt_ids)} tokens.")
    if len(prompt_ids) + max_tokens > max_model_len:
        raise invalid("max_tokens", f"`max_tokens` must be at most {max_model_len - len(prompt_ids)} "
                                    f"(the model's context is {max_model_len} tokens and the prompt has "
                                    f"{len(prompt_ids)}), got {max_tokens!r}.")

    # -- sampling and stopping (bounds and types were checked by the model)
    temperature = 1.0 if req.temperature is None else req.temperature
    if temperature < GREEDY_BELOW:      # as vLLM: logits / 1e-109 would overflow to inf
        temperature = 0.0
    top_p = 1.0 if req.top_p is None else req.top_p
    top_k = None if req.top_k in (None, -1, 0) else req.top_k      # vLLM: -1/0 = off
    seed = req.seed
    if seed is None and temperature > 0:
        seed = secrets.randbits(63)     # the course's sampler always draws from a seeded generator
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    stream = bool(req.stream)
    include_usage = False
    if req.stream_options is not None:
        if not stream:
            raise invalid("stream_options", "`stream_options` is only allowed when `stream` is true, "
                                            f"got {short(body.get('stream_options'))}.")
        include_usage = bool(req.stream_options.include_usage)
    params = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": seed,
              "max_tokens": max_tokens, "stop": stop, "stop_token_ids": list(req.stop_token_ids or []),
              "ignore_eos": bool(req.ignore_eos), "deadline": request_timeout}
    return ParsedRequest(prompt_ids, params, stream, include_usage, req.model)


def _encode(tokenizer, text: str, param: str, max_model_len: int, max_token_chars: int | None) -> list[int]:
    if tokenizer is None:
        raise invalid(param, f"`{param}` must be token ids: this server has no tokenizer, got {short(text)}.")
    if max_token_chars is not None and len(text) > max_token_chars * (max_model_len - 1):
        at_least = -(-len(text) // max_token_chars)
        raise invalid(param, f"`{param}` must be at most {max_model_len - 1} tokens (the model's context is "
                             f"{max_model_len}), got at least {at_least} tokens ({len(text)} characters).")
    return tokenizer.encode(text, add_special_tokens=False)


def max_chars_per_token(tokenizer) -> int | None:
    """The most characters one token of `tokenizer` covers, or None when that bounds
    nothing. A text of c characters then has at least c / that many tokens, so a prompt
    far too long for the context is refused without tokenizing it (a megabyte takes about
    a second to tokenize). Only for a tokenizer whose tokens are spelled out (each
    character of a byte-level token string stands for one byte) and that has no
    normalizer (which could shorten the text before it is split)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.normalizer is not None or not hasattr(tokenizer, "convert_ids_to_tokens"):
        return None
    try:
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        return max(len(t) for t in tokens if t) or None
    except Exception:                  # an unusual tokenizer: no bound, tokenize everything
        return None


# ---------------------------------------------------------------- the engine loop

@dataclass
class Tracked:
    """A request the loop is serving: where its outputs go, and its timings."""
    queue: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    arrival: float
    first_token: float | None = None
    last_token: float | None = None
    n_prompt: int = 0
    n_generated: int = 0
    held: list = field(default_factory=list)   # outputs not yet handed over (stream_interval)
    held_tokens: int = 0


class EngineLoop:
    """One thread that owns the engine: runs commands (add, abort), steps, routes outputs.

    Every engine call happens on this thread, so the engine needs no lock, and the
    asyncio event loop never waits for a step. With nothing unfinished the thread sleeps
    until a command arrives; after a step that produced no output (requests wait, none
    can run) it waits for a command for at most IDLE_WAIT_S instead of stepping again.
    `submit` and `abort` are called from the event loop; `stats()` is a snapshot taken
    after every command batch and step.
    """

    def __init__(self, engine, *, make_params: Callable[[dict], Any] = lambda p: p,
                 metrics: "ServerMetrics | None" = None, clock: Callable[[], float] = time.perf_counter,
                 stream_interval: int = 1):
        check_int("stream_interval", stream_interval, 1)
        self.engine, self.make_params, self.metrics, self.clock = engine, make_params, metrics, clock
        self.stream_interval = stream_interval
        self._commands: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._tracked: dict[str, Tracked] = {}
        self._stats = dict(engine.stats())
        self.steps = 0                 # engine steps this loop has run (for tests and demos)
        self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)

    # -- called from the event loop
    def start(self) -> "EngineLoop":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def stats(self) -> dict:
        return self._stats

    async def submit(self, prompt_ids: list[int], params: dict) -> tuple[str, asyncio.Queue]:
        """Add a request on the loop thread; return (request_id, its output queue).
        Raises what add_request raised (QueueFull, RequestRefused, ValueError)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        tracked = Tracked(asyncio.Queue(), loop, self.clock(), n_prompt=len(prompt_ids))
        self._command(("add", prompt_ids, params, tracked, done))
        return await done, tracked.queue

    def abort(self, request_id: str) -> None:
        """Abort on the loop thread before its next step (no-op once finished; at
        shutdown every request is ended anyway)."""
        if not self._stop.is_set():
            self._command(("abort", request_id))

    def _added(self, done: asyncio.Future, request_id: str) -> None:
        """On the event loop: hand the id to submit(), or abort at once if the handler
        was cancelled (its client left) while the add was queued."""
        if done.cancelled():
            self.abort(request_id)
        elif not done.done():
            done.set_result(request_id)

    def _command(self, cmd) -> None:
        if self._stop.is_set():
            raise APIErrorResponse(503, "The server is shutting down.", type="server_error",
                                   code="shutting_down", retry_after=1)
        self._commands.append(cmd)
        self._wake.set()

    # -- the loop thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()         # before reading the commands: a later submit wakes the wait
            self._run_commands()
            if not self.engine.has_unfinished():
                self._stats = dict(self.engine.stats())
                self._wake.wait(0.5)
                continue
            try:
                outputs = self.engine.step()
            except Exception as exc:   # the engine broke: end every request with an error
                self._fail_all(f"engine step failed: {type(exc).__name__}: {exc}")
                continue
            self.steps += 1
            self._deliver_step(outputs)
            self._stats = dict(self.engine.stats())
            if not outputs:
                # Unfinished requests, none of which could run (e.g. the head of the queue
                # waits for blocks that only an abort can free). Stepping again at once would
                # spin a core doing nothing: wait for the next command, but at most
                # IDLE_WAIT_S, so the engine still ends requests whose deadline passes.
                self._wake.wait(IDLE_WAIT_S)
        self._fail_all("the server shut down", reason="cancelled")

    def _deliver_step(self, outputs) -> None:
        """Route a step's outputs: one wake-up per event loop for the whole step, not
        one per output. A request's first token is handed over before the other
        requests' next tokens: the handlers run, and write to their sockets, in the
        order their queues are filled, and a client reading many streams reads them in
        the order the data arrived, so the first token would otherwise wait behind up
        to max_batch - 1 other streams' events on both sides (the engine puts newly
        admitted requests last in its batch)."""
        now = self.clock()
        deliveries: dict = {}
        for out in outputs:
            tracked = self._route(out, now)
            outs = self._hand_over(tracked, out) if tracked is not None else None
            if outs:
                n = len(out.new_token_ids or ())
                first = n > 0 and tracked.n_generated == n     # this output holds its first tokens
                firsts, others = deliveries.setdefault(tracked.loop, ([], []))
                (firsts if first else others).append((tracked.queue, outs))
        for loop, (firsts, others) in deliveries.items():
            loop.call_soon_threadsafe(_deliver, firsts + others)

    def _run_commands(self) -> None:
        ran = False
        while self._commands:
            ran = True
            cmd = self._commands.popleft()
            if cmd[0] == "add":
                _, prompt_ids, params, tracked, done = cmd
                try:
                    rid = self.engine.add_request(prompt_ids, self.make_params(params))
                except Exception as exc:   # handed back to the handler, which maps it to a status
                    tracked.loop.call_soon_threadsafe(_set_exception, done, exc)
                    continue
                self._tracked[rid] = tracked
                tracked.loop.call_soon_threadsafe(self._added, done, rid)
            else:
                rid = cmd[1]
                tracked = self._tracked.pop(rid, None)
                if tracked is not None:
                    self.engine.abort(rid)
                    if self.metrics:
                        self.metrics.finished(tracked, "cancelled", self.clock())
        if ran:
            self._stats = dict(self.engine.stats())

    def _route(self, out, now: float) -> Tracked | None:
        """Update the request's timings and metrics; return who should get `out`."""
        tracked = self._tracked.get(out.request_id)
        if tracked is None:
            return None                # aborted already: nobody is listening
        n = len(out.new_token_ids or ())
        if n:
            intervals = n
            if tracked.first_token is None:        # TTFT, then n - 1 gaps of zero length
                tracked.first_token = tracked.last_token = now
                intervals = n - 1
                if self.metrics:
                    self.metrics.ttft.observe(now - tracked.arrival)
            if self.metrics and intervals:         # one ITL sample per token after the first
                for _ in range(intervals):
                    self.metrics.itl.observe((now - tracked.last_token) / intervals)
            tracked.last_token = now
            tracked.n_generated += n
        if out.finish_reason is not None:
            del self._tracked[out.request_id]
            if self.metrics:
                self.metrics.finished(tracked, str(out.finish_reason), now)
        return tracked

    def _hand_over(self, tracked: Tracked, out) -> list | None:
        """The outputs to hand to the request's queue now (`out` and any held before it),
        or None to hold `out` back: the first token and the end go at once, the tokens in
        between in groups of stream_interval."""
        tracked.held.append(out)
        tracked.held_tokens += len(out.new_token_ids or ())
        if (out.finish_reason is None and tracked.held_tokens < self.stream_interval
                and tracked.n_generated > tracked.held_tokens):      # some were handed over before
            return None
        outs, tracked.held, tracked.held_tokens = tracked.held, [], 0
        return outs

    def _fail_all(self, message: str, reason: str = "error") -> None:
        for rid, tracked in list(self._tracked.items()):
            try:
                self.engine.abort(rid)
            except Exception:
                pass
            out = _Ended(rid, reason, message)
            if self.metrics:
                self.metrics.finished(tracked, reason, self.clock())
            tracked.loop.call_soon_threadsafe(_deliver, [(tracked.queue, [*tracked.held, out])])
        self._tracked.clear()
        while self._commands:          # adds that never ran
            cmd = self._commands.popleft()
            if cmd[0] == "add":
                cmd[3].loop.call_soon_threadsafe(
                    _set_exception, cmd[4], APIErrorResponse(503, message, type="server_error", retry_after=1))


@dataclass
class _Ended:
    """Stands in for a RequestOutput when the loop ends a request itself."""
    request_id: str
    finish_reason: str
    error: str
    new_token_ids: list = field(default_factory=list)
    text_delta: str = ""
    stop_reason: Any = None
    usage: dict | None = None


def _deliver(items) -> None:
    for queue, outs in items:
        for out in outs:
            queue.put_nowait(out)


def _set_exception(fut: asyncio.Future, exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


# ---------------------------------------------------------------- the engine in a process of its own

@dataclass(frozen=True)
class EngineProcess:
    """What to build in a child process: the reference engine over the shipped tiny model
    (tiny_engine(device, **config)), torch limited to `threads` threads there. Pass it to
    build_app in place of an engine; `python -m course.serve` does."""
    config: dict = field(default_factory=dict)
    device: str | None = None
    threads: int | None = None
    start_timeout: float = 300.0


class ProcessEngineLoop(EngineLoop):
    """EngineLoop whose engine runs in a child process, as vLLM runs its engine core
    apart from its API server.

    In one process the engine thread and the event loop share one interpreter lock: every
    socket write of the event loop hands the lock over and has to win it back from a
    thread that is in the middle of a step, so a step's events cost far more wall time
    than their CPU time, and the two never run at once. Here the child steps on its own
    core while this process serves HTTP. The child runs commands (add, abort) between
    steps in the order they were sent, answers each, and sends each step's outputs in
    one message; this process's thread receives them and routes them exactly as
    EngineLoop does (same metrics, same stream_interval, one wake-up per step). Request
    ids are chosen here, so an add needs no reply before it is sent; QueueFull and the
    other refusals come back with the add's answer.
    """

    def __init__(self, spec: EngineProcess, **kw):
        self.spec = spec
        self._conn = self._process = None
        self._send_lock = threading.Lock()
        self._pending: dict[str, tuple[Tracked, asyncio.Future]] = {}
        super().__init__(_NoEngine(), **kw)
        self.engine.abort = lambda request_id: self._send(("abort", request_id))

    def start(self) -> "ProcessEngineLoop":
        """Start the engine process (unless launch() did) and the thread that serves it."""
        self.launch()
        return super().start()

    def launch(self) -> None:
        """Start the engine process and wait until its engine is built (once; start()
        calls it): `python -m course.serve` does this before it prints its URL."""
        import multiprocessing

        if self._process is not None:
            return
        ctx = multiprocessing.get_context("spawn")       # never fork a process that runs threads
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_engine_process, args=(child, self.spec), name="engine-core",
                                    daemon=True)
        self._process.start()
        child.close()
        if not self._conn.poll(self.spec.start_timeout):
            self._process.kill()
            raise RuntimeError(f"the engine process did not start within {self.spec.start_timeout:g} s")
        msg = self._conn.recv()
        if msg[0] != "ready":
            self._process.join(5)
            raise RuntimeError(f"the engine process failed to start: {msg[1]}")
        self._stats = msg[1]

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._send(("stop",))
        self._thread.join(timeout)
        if self._process is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()

    async def submit(self, prompt_ids: list[int], params: dict) -> tuple[str, asyncio.Queue]:
        if self._stop.is_set():
            raise APIErrorResponse(503, "The server is shutting down.", type="server_error",
                                   code="shutting_down", retry_after=1)
        if not self._thread.is_alive():
            raise APIErrorResponse(503, "The engine has stopped.", type="server_error", code="engine_stopped",
                                   retry_after=1)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        tracked = Tracked(asyncio.Queue(), loop, self.clock(), n_prompt=len(prompt_ids))
        rid = uuid.uuid4().hex
        self._pending[rid] = (tracked, done)
        try:
            self._send(("add", rid, list(prompt_ids), self.make_params(params)))
        except BaseException:
            self._pending.pop(rid, None)
            raise
        return await done, tracked.queue

    def abort(self, request_id: str) -> None:
        """Abort in the engine process, unless the request has already ended there: a
        stream that ends normally calls this too, and a message both ways per request
        for nothing cost the engine process time between steps. A request id is in
        _pending until the engine has added it and in _tracked until its last output
        came back (it is put in _tracked before it leaves _pending), so a request
        in neither has ended."""
        if not self._stop.is_set() and (request_id in self._tracked or request_id in self._pending):
            self._send(("abort", request_id))

    def _send(self, msg) -> None:
        with self._send_lock:
            try:
                self._conn.send(msg)
            except (OSError, ValueError):   # the child is gone: the receiving thread ends every request
                if msg[0] == "add":
                    raise APIErrorResponse(503, "The engine has stopped.", type="server_error",
                                           code="engine_stopped", retry_after=1) from None

    def _run(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                if self._stop.is_set():
                    message, reason = "the server shut down", "cancelled"
                else:
                    message, reason = "the engine process ended", "error"
                break
            kind = msg[0]
            self._stats = msg[-1]            # before routing: an answer never outruns the stats it left
            if kind == "step":
                self.steps += 1
                self._deliver_step([RequestOutputLite(*sent) for sent in msg[1]])
            elif kind == "added":
                rid, exc = msg[1], msg[2]
                tracked, done = self._pending[rid]
                if exc is not None:
                    del self._pending[rid]
                    tracked.loop.call_soon_threadsafe(_set_exception, done, exc)
                else:
                    self._tracked[rid] = tracked      # before leaving _pending: see abort()
                    del self._pending[rid]
                    tracked.loop.call_soon_threadsafe(self._added, done, rid)
            elif kind == "aborted":
                tracked = self._tracked.pop(msg[1], None)
                if tracked is not None and self.metrics:
                    self.metrics.finished(tracked, "cancelled", self.clock())
            elif kind == "failed":
                self._fail_all(msg[1])
            elif kind == "stopped":
                message, reason = "the server shut down", "cancelled"
                break
        self._fail_all(message, reason=reason)
        for rid, (tracked, done) in list(self._pending.items()):
            tracked.loop.call_soon_threadsafe(
                _set_exception, done, APIErrorResponse(503, message, type="server_error", retry_after=1))
        self._pending.clear()


class _NoEngine:
    """ProcessEngineLoop's engine in this process: stats come from the child, and the
    aborts EngineLoop makes when it ends every request go to it (ProcessEngineLoop.abort)."""

    def __init__(self):
        self.abort: Callable[[str], None] = lambda request_id: None

    def stats(self) -> dict:
        return {}


def _engine_process(conn, spec: EngineProcess) -> None:
    """The child of ProcessEngineLoop: build the engine, then run commands and steps,
    blocking for a command only when nothing is left to step."""
    import select
    import signal

    import torch

    # Ctrl-C at a terminal reaches the whole process group: the server stops this process
    # itself (a "stop" command, or the end of the pipe when it is gone).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    try:
        engine, _, _ = tiny_engine(spec.device, **spec.config)
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}", {}))
        return
    conn.send(("ready", dict(engine.stats())))
    # Asked before every step: Connection.poll(0) builds a selector on each call, this
    # poll object is built once (also true when the parent has closed its end).
    commands = select.poll()
    commands.register(conn.fileno(), select.POLLIN)
    try:
        _serve_engine(conn, engine, commands)
    except (EOFError, BrokenPipeError, ConnectionResetError):    # this process's parent is gone
        return


def _serve_engine(conn, engine, commands) -> None:
    """_engine_process's loop: commands, then a step, until "stop"."""
    import pickle

    failed = False
    while True:
        while failed or commands.poll(0) or not engine.has_unfinished():
            cmd = conn.recv()
            if cmd[0] == "add":
                try:
                    engine.add_request(cmd[2], cmd[3], request_id=cmd[1])
                    exc = None
                except Exception as e:     # QueueFull, RequestRefused, ValueError: the handler answers
                    exc = e
                    try:
                        pickle.dumps(exc)
                    except Exception:
                        exc = RuntimeError(f"{type(e).__name__}: {e}")
                conn.send(("added", cmd[1], exc, dict(engine.stats())))
            elif cmd[0] == "abort":
                engine.abort(cmd[1])
                conn.send(("aborted", cmd[1], dict(engine.stats())))
                failed = failed and engine.has_unfinished()
            else:
                conn.send(("stopped", dict(engine.stats())))
                return
        try:
            outputs = engine.step()
        except Exception as exc:           # every request ends with an error; their aborts come back
            failed = True
            conn.send(("failed", f"engine step failed: {type(exc).__name__}: {exc}", dict(engine.stats())))
            continue
        # Each output as a plain tuple of RequestOutputLite's fields, pickled with pickle
        # itself: this runs between two steps of the engine, and a list of dataclasses
        # through Connection.send (ForkingPickler) took several times longer.
        # raw_token_ids (every token so far) is not used by the server: not sent.
        conn.send_bytes(pickle.dumps(("step", [_lite_fields(o) for o in outputs], dict(engine.stats())),
                                     pickle.HIGHEST_PROTOCOL))
        if not outputs:                    # nothing could run: wait for a command, as EngineLoop does
            commands.poll(IDLE_WAIT_S * 1000)


@dataclass
class RequestOutputLite:
    """What the server reads of a RequestOutput from the engine process, which sends
    these fields as a tuple, in this order."""
    request_id: str
    new_token_ids: list
    text_delta: str
    finish_reason: Any = None
    stop_reason: Any = None
    usage: dict | None = None
    error: str | None = None


# What the engine process sends of a RequestOutput (or any object with these attributes):
# the tuple of RequestOutputLite's fields, in their order.
_lite_fields = operator.attrgetter(*(f.name for f in fields(RequestOutputLite)))


# ---------------------------------------------------------------- metrics

class ServerMetrics:
    """Prometheus metrics in a registry of their own (two servers in one process
    do not collide). Gauges and engine counters are read from the loop's stats
    snapshot at scrape time; histograms are observed by the loop."""

    def __init__(self, prefix: str = "course:"):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.prefix = prefix
        self.registry = CollectorRegistry()
        p = prefix
        self.ttft = Histogram(f"{p}time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              buckets=TTFT_BUCKETS, registry=self.registry)
        self.itl = Histogram(f"{p}inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             buckets=TPOT_BUCKETS, registry=self.registry)
        self.tpot = Histogram(f"{p}request_time_per_output_token_seconds",
                              "Histogram of time_per_output_token_seconds per request.",
                              buckets=TPOT_BUCKETS, registry=self.registry)
        self.e2e = Histogram(f"{p}e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                             buckets=E2E_BUCKETS, registry=self.registry)
        self.success = Counter(f"{p}request_success", "Count of finished requests, by finish reason.",
                               ["finished_reason"], registry=self.registry)
        for reason in FINISH_REASONS:
            self.success.labels(METRIC_FINISH_LABELS.get(reason, reason))
        self.prompt_tokens = Counter(f"{p}prompt_tokens", "Number of prefill tokens processed.",
                                     registry=self.registry)
        self.generation_tokens = Counter(f"{p}generation_tokens", "Number of generation tokens processed.",
                                         registry=self.registry)
        self.rejected = Counter(f"{p}requests_rejected", "Requests answered with an error before reaching "
                                "the engine, by reason.", ["reason"], registry=self.registry)
        self._stats: Callable[[], dict] = dict

    def finished(self, tracked: Tracked, reason: str, now: float) -> None:
        """Count an ended request; observe its e2e and, with two tokens or more, its TPOT."""
        self.success.labels(METRIC_FINISH_LABELS.get(reason, reason)).inc()
        self.prompt_tokens.inc(tracked.n_prompt)
        self.generation_tokens.inc(tracked.n_generated)
        self.e2e.observe(now - tracked.arrival)
        if tracked.n_generated >= 2:
            self.tpot.observe((tracked.last_token - tracked.first_token) / (tracked.n_generated - 1))

    def watch(self, stats: Callable[[], dict]) -> None:
        """Report the engine's state from `stats()` (EngineLoop.stats) at every scrape."""
        self._stats = stats
        self.registry.register(_EngineCollector(self))

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest
        return generate_latest(self.registry)


class _EngineCollector:
    def __init__(self, metrics: ServerMetrics):
        self.m = metrics

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s, p = self.m._stats(), self.m.prefix
        total = s.get("kv_blocks_total") or 0
        used = s.get("kv_blocks_used", 0)
        yield GaugeMetricFamily(f"{p}num_requests_running", "Number of requests in the running batch.",
                                value=s.get("running", 0))
        yield GaugeMetricFamily(f"{p}num_requests_waiting", "Number of requests waiting to be admitted.",
                                value=s.get("waiting", 0))
        yield GaugeMetricFamily(f"{p}kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                                value=used / total if total else 0.0)
        yield GaugeMetricFamily(f"{p}kv_cache_blocks_used", "KV-cache blocks in use.", value=used)
        yield GaugeMetricFamily(f"{p}kv_cache_blocks_total", "KV-cache blocks in the pool.", value=total)
        yield CounterMetricFamily(f"{p}num_preemptions", "Cumulative number of preemptions from the engine.",
                                  value=s.get("preemptions", 0))


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (samples only), for tests and notebooks."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


# ---------------------------------------------------------------- the app

def _usage(out, tracked_prompt: int, n_generated: int) -> dict:
    u = getattr(out, "usage", None) or {}
    prompt = u.get("prompt_tokens", u.get("input_tokens", tracked_prompt))
    completion = u.get("completion_tokens", u.get("output_tokens", n_generated))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _stop_reason(value):
    return value if value is None or isinstance(value, (int, str)) else str(value)


def _exception_response(exc: BaseException, metrics: ServerMetrics | None) -> APIErrorResponse:
    """Map what add_request raised to an HTTP error."""
    from_engine = _engine_errors()
    if isinstance(exc, APIErrorResponse):
        reason, err = "shutdown", exc
    elif from_engine and isinstance(exc, from_engine[0]):      # QueueFull
        reason = "queue_full"
        err = APIErrorResponse(429, f"The server is overloaded: {exc}", type="rate_limit_error",
                               code="queue_full", retry_after=1)
    elif from_engine and isinstance(exc, from_engine[1]):      # RequestRefused: it can never run
        reason = "refused"
        err = APIErrorResponse(400, f"`max_tokens` is too large for this server: {exc}", param="max_tokens",
                               code="request_refused")
    elif isinstance(exc, ValueError):                          # the engine's own argument checks
        reason = "invalid"
        param = str(exc).split("`")[1] if str(exc).count("`") >= 2 else None
        err = APIErrorResponse(400, str(exc), param=param, code="invalid_value")
    else:
        reason = "error"
        err = APIErrorResponse(500, f"{type(exc).__name__}: {exc}", type="server_error")
    if metrics:
        metrics.rejected.labels(reason).inc()
    return err


def _engine_errors() -> tuple:
    # The request types live in course.batched, so a learner's own engine raises the same
    # classes and the server can run while course.engine (lab07's answers) is hidden.
    from .batched import QueueFull, RequestRefused
    return QueueFull, RequestRefused


def build_app(engine, tokenizer, *, model_name: str = MODEL_NAME, max_model_len: int = 1024,
              make_params: Callable[[dict], Any] | None = None, request_timeout: float | None = None,
              metrics_prefix: str = "course:", max_body_bytes: int = MAX_BODY_BYTES,
              body_read_timeout: float = BODY_READ_TIMEOUT_S, stream_interval: int = 1):
    """A FastAPI app serving `engine` (anything with add_request/step/abort/
    has_unfinished/stats). The engine loop starts and stops with the app's lifespan;
    `app.state.engine_loop` and `app.state.metrics` are there for tests and demos."""
    from contextlib import asynccontextmanager

    import anyio
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect

    missing = [m for m in ENGINE_METHODS if not callable(getattr(engine, m, None))]
    if missing and not isinstance(engine, EngineProcess):
        raise ValueError(f"`engine` must have {', '.join(ENGINE_METHODS)}, got a {type(engine).__name__} "
                         f"without {', '.join(missing)}.")
    if tokenizer is not None and not callable(getattr(tokenizer, "encode", None)):
        raise ValueError(f"`tokenizer` must be None or have encode(text), got {type(tokenizer).__name__}.")
    check_type("model_name", model_name, str, "a str")
    check_int("max_model_len", max_model_len, 1)
    check_optional("request_timeout", request_timeout, check_number, 0, lo_open=True)
    check_type("metrics_prefix", metrics_prefix, str, "a str")
    check_int("max_body_bytes", max_body_bytes, 1)
    check_number("body_read_timeout", body_read_timeout, 0, lo_open=True)
    metrics = ServerMetrics(metrics_prefix)
    loop_type = ProcessEngineLoop if isinstance(engine, EngineProcess) else EngineLoop
    engine_loop = loop_type(engine, make_params=make_params or default_make_params(), metrics=metrics,
                            stream_interval=stream_interval)
    metrics.watch(engine_loop.stats)
    vocab_size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    max_token_chars = max_chars_per_token(tokenizer) if tokenizer is not None else None

    @asynccontextmanager
    async def lifespan(app):
        engine_loop.start()
        try:
            yield
        finally:
            engine_loop.stop()

    app = FastAPI(title="course.serve", version="1", lifespan=lifespan,
                  description="An OpenAI-compatible API over the course engine. Request bodies: JSON "
                              f"(application/json, UTF-8), at most {max_body_bytes} bytes, arrays and objects "
                              f"nested at most {MAX_JSON_DEPTH} deep. Every error has OpenAI's shape.")
    app.state.engine_loop, app.state.metrics = engine_loop, metrics

    def error(err: APIErrorResponse) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers())

    @app.exception_handler(APIErrorResponse)
    async def _api_error(request, exc: APIErrorResponse):
        return error(exc)

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc: HTTPException):
        """Routing errors (unknown path, wrong method) in OpenAI's shape."""
        if exc.status_code == 404:
            message, code = f"Unknown path {short(request.url.path)}.", "not_found"
        elif exc.status_code == 405:
            message = (f"Method {request.method} is not allowed on {short(request.url.path)}; allowed: "
                       f"{(exc.headers or {}).get('Allow', '')}.")
            code = "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        err = APIErrorResponse(exc.status_code, message, code=code)
        return JSONResponse(err.body(), status_code=exc.status_code, headers={**err.headers(), **(exc.headers or {})})

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):
        return error(APIErrorResponse(500, f"{type(exc).__name__}: {exc}", type="server_error"))

    @app.get("/health", response_model=HealthResponse)
    async def health():
        return {"status": "ok", "model": model_name, **engine_loop.stats()}

    @app.get("/metrics", response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format."}})
    async def prometheus():
        from prometheus_client import CONTENT_TYPE_LATEST
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models", response_model=ModelList)
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                            "owned_by": "course", "max_model_len": max_model_len}]}

    async def read_body(request: Request) -> bytes:
        """The body, refused (413) as soon as it is known to be too large: by its
        Content-Length before reading anything, else once the parts read pass the limit.
        A part that does not come within body_read_timeout answers 408."""
        check_content_type(request.headers.get("content-type"))
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_body_bytes:
            raise _too_large(f"a Content-Length of {int(length)}")
        parts, size = [], 0
        stream = request.stream()
        while True:
            try:
                async with asyncio.timeout(body_read_timeout):
                    part = await anext(stream)
            except StopAsyncIteration:
                return b"".join(parts)
            except TimeoutError:
                raise APIErrorResponse(408, f"The request body stopped arriving: no part came within "
                                            f"{body_read_timeout:g} s ({size} bytes read).",
                                       code="request_timeout") from None
            size += len(part)
            if size > max_body_bytes:
                raise _too_large("more")
            parts.append(part)

    def _too_large(got: str) -> APIErrorResponse:
        return APIErrorResponse(413, f"The request body must be at most {max_body_bytes} bytes, got {got}.",
                                code="request_too_large")

    def check(raw: bytes, kind: str) -> ParsedRequest:
        """Parse, validate and tokenize: CPU work proportional to the body, run off the event loop."""
        return parse_request(parse_body(raw), kind, tokenizer, model_name=model_name, max_model_len=max_model_len,
                             vocab_size=vocab_size, request_timeout=request_timeout, max_token_chars=max_token_chars)

    async def handle(request: Request, kind: str):
        try:
            raw = await read_body(request)
            if len(raw) <= INLINE_PARSE_BYTES:
                parsed = check(raw, kind)
            else:
                parsed = await anyio.to_thread.run_sync(check, raw, kind)
        except APIErrorResponse as err:
            metrics.rejected.labels("invalid").inc()
            return error(err)
        except ClientDisconnect:
            metrics.rejected.labels("invalid").inc()
            return Response(status_code=400)          # nobody is left to read it
        try:
            rid, queue = await engine_loop.submit(parsed.prompt_ids, parsed.params)
        except Exception as exc:
            return error(_exception_response(exc, metrics))
        answer = _Answer(kind, rid, model_name, len(parsed.prompt_ids))
        if parsed.stream:
            return _AbortingStream(answer.sse(queue, parsed.include_usage), engine_loop, rid,
                                   media_type="text/event-stream")
        try:
            out_text, last = await answer.collect(queue, request)
        finally:
            if answer.finish_reason is None:
                engine_loop.abort(rid)        # the client went away before the end
        if answer.finish_reason == "error":
            return error(APIErrorResponse(500, f"The request failed: {getattr(last, 'error', '')}".strip(),
                                          type="server_error", code="engine_error"))
        return answer.body(out_text, last)

    @app.post("/v1/completions", **_documented(CompletionRequest, CompletionResponse, CompletionStreamResponse))
    async def completions(request: Request):
        return await handle(request, "completion")

    @app.post("/v1/chat/completions", **_documented(ChatCompletionRequest, ChatCompletionResponse,
                                                    ChatCompletionStreamResponse))
    async def chat_completions(request: Request):
        return await handle(request, "chat")

    def openapi() -> dict:
        """FastAPI's schema plus the request models, which the routes read themselves
        (to bound the body before parsing it) and so only name by reference."""
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in request_schemas(model_name, max_model_len, vocab_size).items():
                schemas.setdefault(name, definition)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi

    class _AbortingStream(StreamingResponse):
        """A stream that aborts its request however it ends (done, disconnect, error)."""

        def __init__(self, content, loop: EngineLoop, rid: str, **kw):
            super().__init__(content, **kw)
            self._loop, self._rid = loop, rid

        async def __call__(self, scope, receive, send):
            try:
                await super().__call__(scope, receive, send)
            finally:
                self._loop.abort(self._rid)   # a no-op when it finished normally

    return app


ERROR_STATUSES = {
    400: "Invalid request: a parameter (named in `param`), or a body that is not JSON-typed, not UTF-8, "
         "not a JSON object or nested too deep.",
    404: "Unknown model.",
    408: "The body stopped arriving before its end.",
    413: "The body is larger than the limit.",
    429: "The engine's waiting queue is full; retry after Retry-After seconds.",
    500: "The engine failed on this request.",
    503: "The server is shutting down.",
}


def _documented(request_model, response_model, chunk_model) -> dict:
    """Route keywords for /openapi.json: the request body's model, the JSON answer and
    its SSE form (each event described, as OpenAPI 3.1 tools read event streams), and
    every error status in OpenAI's shape."""
    ref = {"$ref": f"#/components/schemas/{request_model.__name__}"}
    return {
        "response_model": None,
        "openapi_extra": {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}},
        "responses": {
            200: {"model": response_model, "description": "The answer; with stream: true, server-sent events "
                                                          "(`data: {chunk}` ... `data: [DONE]`).",
                  "content": {"text/event-stream": {"schema": sse_event_schema(chunk_model)}}},
            **{status: {"model": ErrorResponse, "description": text} for status, text in ERROR_STATUSES.items()},
        },
    }


class _Answer:
    """Builds the OpenAI response objects for one request."""

    def __init__(self, kind: str, rid: str, model: str, n_prompt: int):
        self.kind, self.model, self.n_prompt = kind, model, n_prompt
        self.id = ("cmpl-" if kind == "completion" else "chatcmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.finish_reason: str | None = None
        self.n_generated = 0

    def _choice(self, text: str | None, finish_reason, stop_reason, *, first: bool = False) -> dict:
        if self.kind == "completion":
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason,
                    "stop_reason": stop_reason}
        delta = {}
        if first:
            delta["role"] = "assistant"
        if text is not None:
            delta["content"] = text
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason,
                "stop_reason": stop_reason}

    def _chunk(self, choices: list, usage=None, with_usage: bool = False) -> str:
        obj = {"id": self.id, "object": "text_completion" if self.kind == "completion" else "chat.completion.chunk",
               "created": self.created, "model": self.model, "choices": choices}
        if with_usage:
            obj["usage"] = usage
        return f"data: {json.dumps(obj)}\n\n"

    def _text_event(self, include_usage: bool) -> Callable[[str], str]:
        """The SSE event of a text chunk as a function of its text: the chunk is encoded
        once per request and only the text is encoded per event (same bytes as _chunk)."""
        marker = "\x00text\x00"
        head, tail = self._chunk([self._choice(marker, None, None)], None, include_usage).split(json.dumps(marker))
        dumps = json.dumps
        return lambda text: head + dumps(text) + tail

    def _see(self, out) -> None:
        self.n_generated += len(out.new_token_ids or ())
        if out.finish_reason is not None:
            self.finish_reason = str(out.finish_reason)

    async def collect(self, queue: asyncio.Queue, request) -> tuple[str, Any]:
        """Wait for the whole answer; give up (return) if the client disconnects."""
        parts, out = [], None
        while self.finish_reason is None:
            try:
                out = await asyncio.wait_for(queue.get(), timeout=0.5)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    return "".join(parts), out
                continue
            self._see(out)
            parts.append(out.text_delta or "")
        return "".join(parts), out

    def body(self, text: str, last) -> dict:
        """The whole answer, built (and so checked) as the response model."""
        usage = UsageInfo(**_usage(last, self.n_prompt, self.n_generated))
        common = dict(index=0, finish_reason=self.finish_reason,
                      stop_reason=_stop_reason(getattr(last, "stop_reason", None)))
        if self.kind == "completion":
            answer = CompletionResponse(id=self.id, created=self.created, model=self.model, usage=usage,
                                        choices=[CompletionResponseChoice(text=text, **common)])
        else:
            answer = ChatCompletionResponse(id=self.id, created=self.created, model=self.model, usage=usage,
                                            choices=[ChatCompletionResponseChoice(
                                                message=ChatMessage(content=text), **common)])
        return answer.model_dump()

    async def sse(self, queue: asyncio.Queue, include_usage: bool):
        """Server-sent events: a chunk for each engine output that carries text, a last
        chunk with finish_reason, the usage chunk when asked, then `data: [DONE]`.
        Outputs that are already waiting when the stream gets to run (the engine
        stepped faster than this client is served) go out as one chunk with their
        texts joined, and every event ready at once is written in one piece: one
        socket write per wake-up, not one per token."""
        text_event = self._text_event(include_usage)
        if self.kind == "chat":          # OpenAI opens a chat stream with the role
            yield self._chunk([self._choice("", None, None, first=True)], None, include_usage)
        while self.finish_reason is None:
            outs = [await queue.get()]
            while not queue.empty():
                outs.append(queue.get_nowait())
            texts, events = [], []
            for out in outs:
                self._see(out)
                if self.finish_reason == "error":
                    break
                texts.append(out.text_delta or "")
                if self.finish_reason is not None:
                    break
            text = "".join(texts)
            if text:
                events.append(text_event(text))
            if self.finish_reason == "error":
                err = APIErrorResponse(500, f"The request failed: {getattr(out, 'error', '')}".strip(),
                                       type="server_error", code="engine_error")
                events.append(f"event: error\ndata: {json.dumps(err.body())}\n\n")
            elif self.finish_reason is not None:
                final = self._choice(None if self.kind == "chat" else "", self.finish_reason,
                                     _stop_reason(getattr(out, "stop_reason", None)))
                events.append(self._chunk([final], None, include_usage))
                if include_usage:
                    events.append(self._chunk([], _usage(out, self.n_prompt, self.n_generated), True))
            if self.finish_reason is not None:
                events.append("data: [DONE]\n\n")
            if events:
                yield "".join(events)


def default_make_params() -> Callable[[dict], Any]:
    """The checked dict as a course RequestParams (course.batched, shared by the reference
    engine and a learner's own)."""
    from .batched import RequestParams
    return RequestParams.coerce


# ---------------------------------------------------------------- running it

class BackgroundServer:
    """uvicorn in a daemon thread, on a loopback port (0 = a free one). For tests and
    notebooks; `make serve` runs uvicorn in the foreground instead.

        server = BackgroundServer(app).start()
        server.url           # "http://127.0.0.1:PORT"
        server.stop()
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 header_timeout: float = HEADER_TIMEOUT_S):
        import uvicorn

        self.sock = _bind(host, port)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on",
                                                    timeout_graceful_shutdown=2,
                                                    http=guarded_http(header_timeout)))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="uvicorn", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.sock.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def guarded_http(header_timeout: float = HEADER_TIMEOUT_S, max_header_bytes: int = MAX_HEADER_BYTES) -> type:
    """uvicorn's HTTP/1.1 protocol on httptools (the C parser of `uvicorn[standard]`, and
    what vLLM's server runs on), with two limits on each request's headers.

    Time: uvicorn times out an idle keep-alive connection only after a first response,
    and stops that timer at the first byte received, so a client that opens a connection
    and sends its headers a byte at a time would hold it open for ever (slowloris). Here
    the headers must be complete within `header_timeout` seconds of the connection
    opening, or of its previous response ending; otherwise the connection is closed.
    Size: httptools sets no limit on a request's line and headers, so a client could fill
    the server's memory within that time (gigabytes in seconds over loopback). Once they
    pass `max_header_bytes`, counted as they are parsed, the answer is 431 and the
    connection is closed (uvicorn's h11 protocol stops at 16 KiB). One header still
    arriving is counted by the reads it fills, so memory stays bounded while it grows.
    The body has its own limits (MAX_BODY_BYTES, 413; BODY_READ_TIMEOUT_S, 408).

    httptools rather than uvicorn's pure-Python h11: at 16 streams it took 10-22% less of
    the server's CPU per streamed token (benchmarks/README.md, "HTTP parser")."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    check_number("header_timeout", header_timeout, 0, lo_open=True)
    check_int("max_header_bytes", max_header_bytes, 1)
    too_large = b"Request headers are larger than %d bytes." % max_header_bytes
    answer_431 = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                  b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(too_large), too_large))

    class HeaderLimitsProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None    # set while a request's headers are awaited
        _in_headers = False                              # a request has begun and its headers have not ended
        _begun_here = False                              # ... and it began in the data being parsed
        _received = 0                                    # bytes of reads that were all headers
        _parsed = 0                                      # bytes of request line and headers parsed
        _too_large = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._begun_here = False
            super().data_received(data)
            # The parser hands a header over only once it has all of it, so one endless
            # header is caught here: by counting the reads that were all headers (of a
            # request that began in an earlier read and has not ended its headers).
            if self._in_headers and not self._begun_here and not self.transport.is_closing():
                self._received += len(data)
                if self._received > max_header_bytes:
                    self._refuse()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_headers, self._begun_here, self._received, self._parsed = True, True, 0, 0

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)       # "name: value\r\n"
            super().on_header(name, value)

        def _count(self, n: int) -> None:
            self._parsed += n
            if self._parsed > max_header_bytes:
                self._too_large = True
                # stops the parser at once; uvicorn answers it with send_400_response
                raise httptools.HttpParserError(f"request headers larger than {max_header_bytes} bytes")

        def send_400_response(self, msg: str) -> None:
            if self._too_large:
                self._refuse()
            else:
                super().send_400_response(msg)

        def _refuse(self) -> None:
            self._disarm()
            self.transport.write(answer_431)
            self.transport.close()

        def on_headers_complete(self) -> None:              # a request line and headers are in
            self._in_headers = False
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            next_is_in = bool(self.pipeline)                 # a request whose headers arrived meanwhile
            super().on_response_complete()
            if not next_is_in and not self.transport.is_closing():
                self._arm()                                  # waiting for the next request

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_too_slow(self) -> None:
            self._deadline = None
            serving = self.cycle is not None and not self.cycle.response_complete
            if not serving and not self.transport.is_closing():
                self.transport.close()

    return HeaderLimitsProtocol


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so the URL can be printed before serving. It is made
    with proto IPPROTO_TCP, which every accepted connection inherits: asyncio sets TCP_NODELAY
    only on such sockets. With proto 0 (socket.socket's default) no connection had it, and
    Nagle's algorithm held each stream's first event until the client acknowledged the
    response headers, which clients delay: most of a 47 ms time to first token on loopback
    with one stream, against 7 ms with it (benchmarks/README.md)."""
    check_int("port", port, 0, 65535)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def start_background(engine, tokenizer, *, port: int = 0, **app_kwargs) -> BackgroundServer:
    """Serve `engine` from a background thread and return the running server
    (`server.url`, `server.stop()`); what a notebook calls with its own engine."""
    return BackgroundServer(build_app(engine, tokenizer, **app_kwargs), port=port).start()


def tiny_engine(device: str | None = None, **config):
    """(engine, tokenizer, context length): the reference engine (course.engine) over
    the course decoder with the shipped tiny model's weights. `config`: EngineConfig
    fields; None keeps the default."""
    from .decoder import CourseDecoder
    from .engine import Engine, EngineConfig
    from .tiny_model import load_tiny_model

    hf, tokenizer = load_tiny_model(device)
    decoder = CourseDecoder.from_pretrained(hf)
    engine = Engine(decoder, tokenizer, config=EngineConfig(**{k: v for k, v in config.items() if v is not None}))
    return engine, tokenizer, decoder.config.n_positions


def tiny_tokenizer():
    """(tokenizer, context length) of the shipped tiny model, without loading its weights:
    what this process needs when the engine runs in another (EngineProcess)."""
    from transformers import AutoConfig, AutoTokenizer

    from .tiny_model import TINY_MODEL_DIR
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL_DIR, local_files_only=True)
    return tokenizer, AutoConfig.from_pretrained(TINY_MODEL_DIR, local_files_only=True).n_positions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Serve the course engine and the tiny model over an "
                                             "OpenAI-compatible HTTP API.")
    ap.add_argument("--host", default="127.0.0.1", help="default: loopback only")
    ap.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--num-blocks", type=int, default=None, help="KV blocks in the pool")
    ap.add_argument("--block-size", type=int, default=None, help="tokens per KV block")
    ap.add_argument("--max-batch", type=int, default=None, help="most requests in one step")
    ap.add_argument("--max-waiting", type=int, default=None, help="waiting requests before 429")
    ap.add_argument("--request-timeout", type=float, default=None,
                    help="seconds; a request still running then ends with finish_reason 'timeout'")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--stream-interval", type=int, default=1,
                    help="tokens per streamed chunk after the first (default 1: every token at once)")
    ap.add_argument("--engine", choices=("process", "thread"), default="process",
                    help="where the engine runs: a process of its own (default) or a thread of this one")
    ap.add_argument("--log-level", default="info")
    ns = ap.parse_args(argv)
    import torch
    import uvicorn

    if ns.threads is not None:
        torch.set_num_threads(ns.threads)

    config = dict(num_blocks=ns.num_blocks, block_size=ns.block_size, max_batch=ns.max_batch,
                  max_waiting=ns.max_waiting)
    if ns.engine == "thread":
        engine, tokenizer, max_len = tiny_engine(ns.device, **config)
    else:                              # the child builds the engine; this process needs the tokenizer
        tokenizer, max_len = tiny_tokenizer()
        engine = EngineProcess(config, ns.device, ns.threads)
    app = build_app(engine, tokenizer, max_model_len=max_len, request_timeout=ns.request_timeout,
                    stream_interval=ns.stream_interval)
    if isinstance(engine, EngineProcess):
        app.state.engine_loop.launch()  # the URL is printed once the engine can answer
    sock = _bind(ns.host, ns.port)
    sock.listen(2048)                  # connections made as soon as the URL is printed wait in the backlog
    url = f"http://{ns.host}:{sock.getsockname()[1]}"
    print(f"Serving {MODEL_NAME} at {url}/v1 (OpenAI-compatible; metrics at {url}/metrics). Ctrl-C stops.",
          flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level=ns.log_level, timeout_graceful_shutdown=2,
                                  http=guarded_http())).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
