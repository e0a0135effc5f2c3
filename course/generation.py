"""The course's generation loop: model -> logits -> sampler -> append -> stop check. Defined in lab03.

    result = generate(model, input_ids, max_tokens=16, stop=["\\nUser:"])
    result.finish_reason, result.stop_reason, result.text, result.raw_output

    stream = stream_generate(model, input_ids, max_tokens=16, stop=["\\nUser:"])
    for delta in stream: print(delta, end="")
    stream.result                         # the same GenerationResult, once exhausted

Later labs (the serving loop) use this module instead of a student's Lab 03 answers.
Lab 03 proves the student's loop equal to this one on fixed fixtures.

What one step does, and the order in which endings win (the precedence table of Lab 03):

    before the model call   1. cancel.is_set()             -> cancelled
                            2. clock() - start >= deadline  -> timeout
    the call                3. model raises, NaN logits, sampler raises -> error (no token kept)
    after appending         4. content_filter(token, raw)   -> content_filter
                            5. token == eos_token_id        -> stop (stop_reason None)
                            6. token in stop_token_ids      -> stop (stop_reason = the id)
                            7. a stop string completed      -> stop (stop_reason = the string)
                            8. len(tokens) == max_tokens    -> length

So EOS on the last allowed token is `stop`, a cancellation that arrives during the last
call is too late (the run already ended with `stop` or `length`), and cancellation wins
over an expired deadline.

The result always holds the raw output: the text of every generated token (including the
token that ended the run), before any trimming. `text` is what a user may see:
  * EOS: raw without the EOS token's text;
  * a stop token id: without its text, unless include_stop_str_in_output;
  * a stop string: cut before the earliest-completed match (after it, with
    include_stop_str_in_output), dropping whatever followed it in the same token;
  * content_filter: without the rejected token;
  * length, cancelled, timeout, error: the raw output itself.
"""
from __future__ import annotations

ANSWERS_FOR = "lab03"  # the grader hides this module while lab03 (or an earlier lab) is graded

import math

import torch

from ._checks import check_int, is_number
from .clock import monotonic
from .finish import FinishReason
# the scaffolding (no answers) lives in course.runs; re-exported here for the labs after Lab 03
from .runs import MAX_STOP_STRINGS, GenerationResult, greedy_sampler, seeded_sampler  # noqa: F401


# ---------------------------------------------------------------- parameters

def validate_params(*, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False,
                    deadline=None) -> dict:
    """Check the stopping parameters up front (like vLLM's SamplingParams) and return
    them normalised: stop and stop_token_ids as new lists, never None."""
    check_int("max_tokens", max_tokens, 1)
    if stop is None:
        stop = []
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ValueError(f"`stop` must be a list of strings, got {stop!r}.")
    if any(s == "" for s in stop):
        raise ValueError(f"`stop` must not contain an empty string (it would match everywhere), got {stop!r}.")
    if len(stop) > MAX_STOP_STRINGS:
        raise ValueError(f"`stop` may hold at most {MAX_STOP_STRINGS} strings, got {len(stop)}.")
    if stop_token_ids is None:
        stop_token_ids = []
    if not isinstance(stop_token_ids, list) or not all(
            type(t) is int and t >= 0 for t in stop_token_ids):
        raise ValueError(f"`stop_token_ids` must be a list of integers >= 0, got {stop_token_ids!r}.")
    if type(include_stop_str_in_output) is not bool:
        raise ValueError(f"`include_stop_str_in_output` must be True or False, got {include_stop_str_in_output!r}.")
    if deadline is not None and (not is_number(deadline) or math.isnan(deadline) or deadline <= 0):
        raise ValueError(f"`deadline` must be None or a number of seconds > 0, got {deadline!r}.")
    return {"max_tokens": max_tokens, "stop": list(stop), "stop_token_ids": list(stop_token_ids),
            "include_stop_str_in_output": include_stop_str_in_output, "deadline": deadline}


# ---------------------------------------------------------------- stop strings and holdback

def first_stop(text: str, stop: list[str]) -> tuple[int, int, str] | None:
    """The stop-string match that completes first in `text`: (start, end, stop_string),
    text[start:end] == stop_string, smallest `end`; on equal ends the longer string.
    None when no stop string occurs. Reading the text one character at a time would
    stop at exactly this match, so the answer never depends on token boundaries."""
    best = None
    for s in stop:
        i = text.find(s)
        if i >= 0 and (best is None or (i + len(s), i) < (best[1], best[0])):
            best = (i, i + len(s), s)
    return best


def holdback_length(text: str, stop: list[str]) -> int:
    """Length of the longest suffix of `text` that is a proper, non-empty prefix of some
    stop string: the characters a stream must hold back because more text could still
    complete a stop string with them. 0 when no suffix can."""
    best = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), best, -1):  # longest first
            if text.endswith(s[:n]):
                best = n
                break
    return best


# ---------------------------------------------------------------- the loop

def _check_input_ids(input_ids) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"`input_ids` must be a (1, T) tensor of token ids, got {got}.")


def _steps(model, input_ids, p, *, sampler, cancel, clock, content_filter):
    """The loop as a generator: yields the raw text after every token that does not end
    the run, and returns the GenerationResult."""
    eos = getattr(model, "eos_token_id", None)
    ids = input_ids
    tokens: list[int] = []
    raw = ""
    start = clock() if p["deadline"] is not None else 0.0

    def done(reason, text=None, stop_reason=None, error=None):
        return GenerationResult(tokens=list(tokens), text=raw if text is None else text,
                                finish_reason=reason, stop_reason=stop_reason,
                                usage={"input_tokens": int(input_ids.shape[1]), "output_tokens": len(tokens)},
                                raw_output=raw, error=error)

    while True:
        # Between steps: the client and the clock may end the run before the next call.
        if cancel is not None and cancel.is_set():
            return done(FinishReason.CANCELLED)
        if p["deadline"] is not None and clock() - start >= p["deadline"]:
            return done(FinishReason.TIMEOUT)
        try:
            logits = model(ids)[0]  # (V,)
            if torch.isnan(logits).any():
                raise ValueError(f"the model returned NaN logits at step {len(tokens)}")
            token = int(sampler(logits))
        except Exception as e:  # never propagate: record it as the run's ending
            return done(FinishReason.ERROR, error=f"{type(e).__name__}: {e}")
        piece = model.decode([token])
        before = raw
        tokens.append(token)
        raw += piece
        ids = torch.cat([ids, torch.tensor([[token]], dtype=ids.dtype)], dim=1)  # (1, T + 1)

        if content_filter is not None and content_filter(token, raw):
            return done(FinishReason.CONTENT_FILTER, text=before)
        if token == eos:
            return done(FinishReason.STOP, text=before)
        if token in p["stop_token_ids"]:
            return done(FinishReason.STOP, text=raw if p["include_stop_str_in_output"] else before,
                        stop_reason=token)
        match = first_stop(raw, p["stop"])
        if match is not None:
            i, j, s = match
            return done(FinishReason.STOP, text=raw[:j] if p["include_stop_str_in_output"] else raw[:i],
                        stop_reason=s)
        if len(tokens) == p["max_tokens"]:
            return done(FinishReason.LENGTH)
        yield raw


def _start(model, input_ids, *, max_tokens, stop, stop_token_ids, include_stop_str_in_output, sampler,
           cancel, clock, deadline, content_filter):
    p = validate_params(max_tokens=max_tokens, stop=stop, stop_token_ids=stop_token_ids,
                        include_stop_str_in_output=include_stop_str_in_output, deadline=deadline)
    _check_input_ids(input_ids)
    for name, fn in (("sampler", sampler), ("clock", clock), ("content_filter", content_filter)):
        if fn is not None and not callable(fn):
            raise ValueError(f"`{name}` must be None or callable, got {fn!r}.")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise ValueError(f"`cancel` must be None or have is_set() (e.g. threading.Event), got {cancel!r}.")
    steps = _steps(model, input_ids, p, sampler=sampler or greedy_sampler, cancel=cancel,
                   clock=clock or monotonic, content_filter=content_filter)
    return p, steps


def generate(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None, include_stop_str_in_output=False,
             sampler=None, cancel=None, clock=None, deadline=None, content_filter=None) -> GenerationResult:
    """Generate from `input_ids` (1, T0) until one of the endings of the module docstring.

    model: model(input_ids (1, T)) -> logits (1, V); model.decode([id]) -> str;
        model.eos_token_id (or None).
    sampler: logits (V,) -> int; greedy when None.
    cancel: None or an object with is_set(), checked before every model call.
    clock, deadline: the deadline (seconds) is measured on `clock` (default: the real
        monotonic clock) from the start of the call; checked before every model call.
    content_filter: None or f(token_id, raw_text_so_far) -> True to block.
    Bad parameters raise ValueError before the model is called; everything that goes
    wrong during generation is returned as the finish reason `error`.
    """
    _, steps = _start(model, input_ids, max_tokens=max_tokens, stop=stop, stop_token_ids=stop_token_ids,
                      include_stop_str_in_output=include_stop_str_in_output, sampler=sampler,
                      cancel=cancel, clock=clock, deadline=deadline, content_filter=content_filter)
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value


class TextStream:
    """Iterator of text deltas; `result` is the GenerationResult once it is exhausted.

    Holdback: while the run goes on, the text streamed so far is the raw text minus its
    longest suffix that could still grow into a stop string (holdback_length). So a
    stop string, or any part of one, never reaches the client; held text is released as
    soon as it can no longer start a stop string. With include_stop_str_in_output nothing
    needs holding back. Joined, the deltas equal generate(...).text for the same call.
    """

    def __init__(self, steps, stop: list[str]):
        self._steps = steps
        self._stop = stop
        self._sent = 0
        self.result: GenerationResult | None = None

    def __iter__(self):
        return self

    def __next__(self) -> str:
        while self.result is None:
            try:
                raw = next(self._steps)
            except StopIteration as finished:
                self.result = finished.value
                delta = self.result.text[self._sent:]
                self._sent = len(self.result.text)
            else:
                safe = len(raw) - holdback_length(raw, self._stop)
                delta = raw[self._sent:safe]
                self._sent = max(self._sent, safe)
            if delta:
                return delta
        raise StopIteration


def stream_generate(model, input_ids, *, max_tokens, stop=None, stop_token_ids=None,
                    include_stop_str_in_output=False, sampler=None, cancel=None, clock=None, deadline=None,
                    content_filter=None) -> TextStream:
    """Like generate, but returns a TextStream of text deltas (parameters are checked now,
    not at the first next())."""
    p, steps = _start(model, input_ids, max_tokens=max_tokens, stop=stop, stop_token_ids=stop_token_ids,
                      include_stop_str_in_output=include_stop_str_in_output, sampler=sampler,
                      cancel=cancel, clock=clock, deadline=deadline, content_filter=content_filter)
    return TextStream(steps, [] if p["include_stop_str_in_output"] else p["stop"])
