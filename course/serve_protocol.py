"""The wire protocol of course.serve: OpenAI's request and response bodies as pydantic models.

One class per body, named as in vLLM's OpenAI protocol module
(vllm/entrypoints/openai/protocol.py): CompletionRequest, ChatCompletionRequest,
CompletionResponse, CompletionStreamResponse, ChatCompletionResponse,
ChatCompletionStreamResponse, UsageInfo, ModelList, ErrorResponse. The server publishes
them at `/openapi.json`, so the schema is the documentation, and a fuzzer can read it.

Every request field carries its bounds in the schema (minimum, maximum, lengths, enums)
AND the words of the course's error template, built from the same numbers, so the check
and the message cannot drift apart:

    `temperature` must be a number in [0.0, 2.0], got 2.5.

`explain(ValidationError, model, body)` turns pydantic's first error into that sentence
and the parameter it names (`messages[0].role`, `stop`, ...).

Request models are strict: JSON `true` is not the integer 1, `"5"` is not a number, and
`7.5` is not an integer (`7.0` is 7, as JSON Schema counts it). A parameter OpenAI has
but the course does not support (n, best_of, echo, logprobs, penalties, logit_bias,
suffix) is accepted at its neutral value only, and the schema says which value that is.

Limits on a body, before any of this runs (course.serve checks them; they are stated here
so the schema module and the server agree):
    MAX_BODY_BYTES  1 MiB  a larger Content-Length is refused before the body is read; a
                           body without one is read up to the limit and refused there
    MAX_JSON_DEPTH  32     arrays and objects nested deeper are refused before parsing
                           (the deepest valid request nests 5 levels: body, messages, a
                           message, its content parts, a part)
"""
from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Optional, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

MAX_BODY_BYTES = 1 << 20
MAX_JSON_DEPTH = 32
MAX_STOP_STRINGS = 16            # the course generation loop's limit (OpenAI's is 4)
MAX_STOP_TOKEN_IDS = 64
DEFAULT_COMPLETION_MAX_TOKENS = 16   # OpenAI's default for /v1/completions
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Finish reasons a response can carry. "error" never does: an engine error answers HTTP 500
# (or an SSE `error` event) instead of a choice.
WIRE_FINISH_REASONS = ("stop", "length", "cancelled", "timeout", "content_filter")
FinishReason = Literal["stop", "length", "cancelled", "timeout", "content_filter"]


# ---------------------------------------------------------------- rules: bounds + their words

class Rule:
    """What a field must be, in the words of the course template; kept in the field's
    Annotated metadata next to the constraints it describes."""

    def __init__(self, must: str, template: str = "`{param}` must be {must}, got {value}."):
        self.must, self.template = must, template

    def message(self, param: str, value) -> str:
        return self.template.format(param=param, must=self.must, value=short(value))


def short(value) -> str:
    """repr(value), cut to 60 characters: a message never echoes a megabyte back."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fmt(x) -> str:
    return repr(float(x)) if isinstance(x, float) else repr(x)


def Number(lo: float, hi: float, *, lo_open: bool = False):
    """An optional number in [lo, hi] (or (lo, hi]); NaN and infinities never pass."""
    lower = {"gt": lo} if lo_open else {"ge": lo}
    interval = f"{'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}]"
    return Annotated[Optional[Annotated[float, Field(le=hi, allow_inf_nan=False, **lower)]],
                     Rule(f"a number in {interval}")]


def _integral(value):
    """JSON Schema's integer: 7.0 is 7 (a number without a fraction); 7.5, "7" and true are not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Int(**bounds):
    """An integer with bounds (ge, le) that the schema shows as minimum and maximum."""
    return Annotated[int, Field(**bounds), BeforeValidator(_integral)]


def Integer(lo: int, hi: int | None = None, must: str | None = None):
    """An optional integer >= lo (and <= hi); bool is not an integer."""
    words = must or (f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}")
    return Annotated[Optional[Int(ge=lo, le=hi)], Rule(words)]


def Boolean():
    return Annotated[Optional[bool], Rule("true or false")]


def _only_false(value: bool) -> bool:
    if value is not False:
        raise ValueError("only false is supported")
    return value


def Unsupported(neutral, why: str):
    """A parameter accepted only at its neutral value (n=1, echo=false, ...)."""
    import json

    words = f"{json.dumps(neutral)} ({why})"
    if neutral is False:
        inner = Annotated[bool, AfterValidator(_only_false), Field(json_schema_extra={"enum": [False]})]
    elif isinstance(neutral, str):
        inner = Annotated[str, Field(max_length=len(neutral))]
    elif isinstance(neutral, int):
        inner = Int(ge=neutral, le=neutral)
    else:                                            # 0.0: a number that must be zero
        inner = Annotated[float, Field(ge=neutral, le=neutral)]
    return Annotated[Optional[inner], Rule(words)]


NonEmptyString = Annotated[str, Field(min_length=1)]
TokenId = Int(ge=0)


class OpenAIBaseModel(BaseModel):
    """A request body: strict types, unknown fields refused."""
    model_config = ConfigDict(strict=True, extra="forbid")
    rule: ClassVar[Rule | None] = None          # the words for "this item is not even an object"


class ResponseModel(BaseModel):
    """A response body: what the server sends (checked in tests against what it sent)."""
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests

class StreamOptions(OpenAIBaseModel):
    include_usage: Optional[bool] = Field(False, description="Send one more chunk, with usage, before [DONE].")
    continuous_usage_stats: Optional[bool] = Field(False, description="Accepted as in vLLM; has no effect.")


class _CommonRequest(OpenAIBaseModel):
    """Fields both endpoints share, in the order the server checks them."""
    model: Annotated[str, Rule("a string")] = Field(
        description="The served model's id (GET /v1/models); another id answers 404 model_not_found.")
    n: Unsupported(1, "one choice per request") = 1
    presence_penalty: Unsupported(0.0, "penalties are not supported") = 0.0
    frequency_penalty: Unsupported(0.0, "penalties are not supported") = 0.0
    logit_bias: Annotated[Optional[Annotated[dict[str, float], Field(max_length=0)]],
                          Rule("", "`{param}` is not supported, got {value}.")] = None
    user: Annotated[Optional[str], Rule("a string")] = None
    temperature: Number(0.0, 2.0) = Field(1.0, description="0 (and anything below 1e-5, as in vLLM) is greedy.")
    top_p: Number(0.0, 1.0, lo_open=True) = Field(1.0, description="Nucleus sampling; 1 is off.")
    top_k: Integer(-1, must="an integer >= -1 (-1 or 0: off)") = Field(
        None, description="vLLM's extension: keep the k most likely tokens; -1 or 0 is off.")
    seed: Integer(INT64_MIN, INT64_MAX, must="a 64-bit integer") = Field(
        None, description="Replays a sampled answer; a random one when absent.")
    stop: Annotated[Optional[Union[NonEmptyString,
                                   Annotated[list[NonEmptyString], Field(max_length=MAX_STOP_STRINGS)]]],
                    Rule(f"a non-empty string or a list of at most {MAX_STOP_STRINGS} non-empty strings")] = Field(
        None, description="Strings that end the answer; the string itself is not sent.")
    stop_token_ids: Annotated[Optional[Annotated[list[TokenId], Field(max_length=MAX_STOP_TOKEN_IDS)]],
                              Rule(f"a list of at most {MAX_STOP_TOKEN_IDS} integers >= 0")] = Field(
        None, description="vLLM's extension: token ids that end the answer.")
    ignore_eos: Boolean() = Field(False, description="vLLM's extension: go on past the end-of-text token.")
    stream: Boolean() = Field(False, description="Answer as server-sent events.")
    stream_options: Annotated[Optional[StreamOptions], Rule('an object like {"include_usage": true}')] = Field(
        None, description="Only with stream: true.")


class CompletionRequest(_CommonRequest):
    """POST /v1/completions."""
    prompt: Annotated[Union[NonEmptyString,
                            Annotated[list[TokenId], Field(min_length=1)],
                            Annotated[list[NonEmptyString], Field(min_length=1, max_length=1)],
                            Annotated[list[Annotated[list[TokenId], Field(min_length=1)]],
                                      Field(min_length=1, max_length=1)]],
                      Rule("a string or a list of token ids (one prompt; n=1)")] = Field(
        description="One prompt: text, or token ids below the vocabulary size; a batch of one is one prompt.")
    max_tokens: Integer(1) = Field(DEFAULT_COMPLETION_MAX_TOKENS, description=(
        "Tokens to generate at most; prompt + max_tokens must fit the model's context."))
    echo: Unsupported(False, "echo is not supported") = False
    best_of: Unsupported(1, "one choice per request") = 1
    suffix: Unsupported("", "suffix is not supported") = None
    logprobs: Unsupported(0, "logprobs are not supported") = None


class TextContentPart(OpenAIBaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    type: Literal["text"]
    text: str


class ChatMessageParam(OpenAIBaseModel):
    """One message of a chat request; other keys OpenAI defines (name, ...) are ignored."""
    model_config = ConfigDict(strict=True, extra="ignore")
    rule: ClassVar[Rule] = Rule("an object with role and content")
    role: Annotated[Literal["user", "assistant"],
                    Rule("'user' or 'assistant' (the tiny model has no system prompt)")]
    content: Annotated[Union[str, list[TextContentPart]], Rule("a string or a list of text parts")]


class ChatCompletionRequest(_CommonRequest):
    """POST /v1/chat/completions."""
    messages: Annotated[list[ChatMessageParam], Field(min_length=1),
                        Rule("a non-empty list of messages")] = Field(
        description="Rendered with the tiny model's prompt format; the last message must be the user's.")
    max_tokens: Integer(1) = Field(None, description="Deprecated by OpenAI for max_completion_tokens; give one.")
    max_completion_tokens: Integer(1) = Field(None, description=(
        "Tokens to generate at most; without it, whatever the context has left."))
    logprobs: Unsupported(False, "logprobs are not supported") = False
    top_logprobs: Unsupported(0, "logprobs are not supported") = None


# ---------------------------------------------------------------- responses

class UsageInfo(ResponseModel):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)


class _Choice(ResponseModel):
    index: int = Field(0, ge=0)
    logprobs: None = None
    finish_reason: Optional[FinishReason] = Field(None, description=(
        "Why the answer ended; null until it has. cancelled: aborted; timeout: the server's deadline."))
    stop_reason: Union[int, str, None] = Field(None, description=(
        "vLLM's extension: the stop string or token id that ended it; null for EOS or length."))


class CompletionResponseChoice(_Choice):
    text: str


class CompletionResponse(ResponseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionResponseChoice]
    usage: UsageInfo


class CompletionStreamResponse(ResponseModel):
    """One `data:` event of a completions stream; the usage chunk has no choices."""
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionResponseChoice]
    usage: Optional[UsageInfo] = Field(None, description="Only with stream_options.include_usage.")


class ChatMessage(ResponseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionResponseChoice(_Choice):
    message: ChatMessage


class ChatCompletionResponse(ResponseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionResponseChoice]
    usage: UsageInfo


class DeltaMessage(ResponseModel):
    role: Optional[Literal["assistant"]] = None
    content: Optional[str] = None


class ChatCompletionResponseStreamChoice(_Choice):
    delta: DeltaMessage


class ChatCompletionStreamResponse(ResponseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatCompletionResponseStreamChoice]
    usage: Optional[UsageInfo] = None


class ModelCard(ResponseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    max_model_len: int = Field(ge=1)


class ModelList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class HealthResponse(BaseModel):
    """GET /health: "ok" and the engine's counters (running, waiting, kv_blocks_*, ...)."""
    model_config = ConfigDict(extra="allow")
    status: Literal["ok"]
    model: str


class ErrorInfo(ResponseModel):
    message: str
    type: str = Field(description="invalid_request_error, rate_limit_error or server_error.")
    param: Optional[str] = Field(description="The request parameter at fault, when there is one.")
    code: Optional[str]


class ErrorResponse(ResponseModel):
    """OpenAI's error shape: every 4xx and 5xx answer has it."""
    error: ErrorInfo


# ---------------------------------------------------------------- pydantic's errors in the course's words

def explain(exc: ValidationError, model: type[BaseModel], body: dict) -> tuple[str, str]:
    """(param, message) for the first error: unknown arguments first, then fields in the
    model's order. The message is the field's Rule with the value it got."""
    errors = exc.errors()
    order = list(model.model_fields)
    extra = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if extra:
        name = str(extra[0]["loc"][0])
        return name, f"Unrecognized request argument supplied: `{name}`."
    first = min(errors, key=lambda e: order.index(e["loc"][0]) if e["loc"] and e["loc"][0] in order else len(order))
    return _describe(first["loc"], model, body)


def _describe(loc: tuple, model: type[BaseModel], body: dict) -> tuple[str, str]:
    """Walk `loc` through the model (and the body, for the value) as far as named fields
    and list items of models go; the last rule met is the one that failed."""
    cls, value, path, rule, i = model, body, [], None, 0
    while i < len(loc) and cls is not None:
        field = cls.model_fields.get(loc[i]) if isinstance(loc[i], str) else None
        if field is None:
            break
        path.append(loc[i])
        value = value.get(loc[i]) if isinstance(value, dict) else None
        rule = next((m for m in field.metadata if isinstance(m, Rule)), rule)
        i += 1
        item = _list_item_model(field.annotation)
        cls = None
        if item is not None and i < len(loc) and isinstance(loc[i], int):
            index = loc[i]
            path.append(index)
            value = value[index] if isinstance(value, list) and index < len(value) else None
            rule, cls, i = item.rule or rule, item, i + 1
    param = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if n else p) for n, p in enumerate(path))
    if rule is None:
        return param, f"`{param}` is not valid, got {short(value)}."
    return param, rule.message(param, value)


def _list_item_model(annotation) -> type[BaseModel] | None:
    """M for list[M] (possibly Optional or Annotated); None otherwise."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    args = [a for a in get_args(annotation) if a is not type(None)] if get_origin(annotation) is Union else None
    if args and len(args) == 1:
        return _list_item_model(args[0])
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return item if isinstance(item, type) and issubclass(item, BaseModel) else None
    return None


# ---------------------------------------------------------------- nesting depth, before parsing

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when arrays/objects in `text` nest deeper than `limit` (strings skipped).
    Runs before json.loads, whose recursion would otherwise be the limit."""
    depth = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if ch in "[{" else -1
        if depth > limit:
            return True
    return False


REF = "#/components/schemas/{model}"


def sse_event_schema(chunk: type[BaseModel]) -> dict[str, Any]:
    """One server-sent event of a stream, as schemathesis and OpenAPI 3.2's itemSchema read
    it ({"event", "data", ...}): `data: [DONE]` last, an `error` event carrying an
    ErrorResponse, and otherwise a `data:` chunk (the JSON of `chunk`)."""
    def payload(model: type[BaseModel]) -> dict:
        return {"type": "string", "contentMediaType": "application/json",
                "contentSchema": {"$ref": REF.format(model=model.__name__)}}

    return {"type": "object", "required": ["data"],
            "properties": {"event": {"type": "string", "enum": ["message", "error"]}, "data": {"type": "string"}},
            "if": {"properties": {"data": {"const": "[DONE]"}}},
            "else": {"if": {"properties": {"event": {"const": "error"}}, "required": ["event"]},
                     "then": {"properties": {"data": payload(ErrorResponse)}},
                     "else": {"properties": {"data": payload(chunk)}}}}


def request_schemas(model_name: str | None = None, max_model_len: int | None = None,
                    vocab_size: int | None = None) -> dict[str, Any]:
    """JSON schemas of the request models and the stream chunks (and what they use), for
    /openapi.json's components; a route refers to them as #/components/schemas/<Name>. A server adds
    what only it knows: its model's id (an enum of one), max_tokens below its context,
    prompt token ids below its vocabulary size."""
    from pydantic.json_schema import models_json_schema

    _, top = models_json_schema([(CompletionRequest, "validation"), (ChatCompletionRequest, "validation"),
                                 (CompletionStreamResponse, "serialization"),
                                 (ChatCompletionStreamResponse, "serialization"), (ErrorResponse, "serialization")],
                                ref_template=REF)
    schemas = top["$defs"]
    for name in ("CompletionRequest", "ChatCompletionRequest"):
        props = schemas[name]["properties"]
        if model_name is not None:
            props["model"]["enum"] = [model_name]
        if max_model_len is not None:     # a prompt has at least one token
            for key in ("max_tokens", "max_completion_tokens"):
                if key in props:
                    _set_on_integers(props[key], maximum=max_model_len - 1)
    if vocab_size is not None:
        _set_on_integers(schemas["CompletionRequest"]["properties"]["prompt"], maximum=vocab_size - 1)
    return schemas


def _set_on_integers(schema, **keywords) -> None:
    """Add keywords to every integer schema inside `schema` (through anyOf and items)."""
    if isinstance(schema, dict):
        if schema.get("type") == "integer":
            schema.update(keywords)
        for value in schema.values():
            _set_on_integers(value, **keywords)
    elif isinstance(schema, list):
        for value in schema:
            _set_on_integers(value, **keywords)
