"""Helpers for writing graders: inputs and recorded calls (probe side), failures with
expected and got (test side), the shipped model.

A lab's graders are pytest tests (autograder/graders/labNN/, see autograder/plugin.py).

Probe side (probes.py: runs in the student's process; never sees expected values):
    Input(label, make, kwargs)     one call's arguments, built fresh each time
    record(fn, args, kwargs)       -> {"result", "unchanged", "same_object"}
    one_thread(), shipped_model()  torch on one thread; the tiny model, loaded once
    shipped_decoder()              the course's decoder with the tiny model's weights and its
                                   tokenizer, without importing transformers
    audited(pool), ledger_counts(pool)
                                   a KV pool whose blocks in use the grader counts itself

Test side (test_*.py: the grading process; trusts nothing but the plain observation;
each raises Fail with what was expected and what came back):
    result_of(rec, call, hint)     the value, or a Fail that explains what was raised
    rejects(rec, call, param, value, hint)
                                   a ValueError naming `param` and showing `value`
                                   in any reasonable form (repr, str, len, type)
    unchanged(rec, call)           the inputs were not modified in place
    close(got, expected, ...)      values equal within tolerance; NaN == NaN, inf == inf
    explain(raised)                one sentence and a hint for an exception record
    reference_rejects(ref_fn, ...) the reference rejects what a case demands rejected
"""
from __future__ import annotations

import contextlib
import copy
import math
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import torch

from .core import STUB_HINT, STUB_MESSAGE, Fail, as_tensor, close, describe, is_raised, is_stub, raised, same_values

__all__ = ["Input", "record", "result_of", "rejects", "unchanged", "close", "explain", "reference_rejects",
           "value_forms", "as_tensor", "describe", "Fail", "one_thread", "shipped_model", "shipped_decoder"]


# ---------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Input:
    """One call's arguments, built fresh each time (so probe and judge see the same
    values and a student's in-place change cannot leak into the next case).

    label:  how messages name the input ("fixture 'peaked'", "a (3, 5) batch")
    make:   () -> tuple of positional arguments
    kwargs: keyword arguments (plain values)
    """
    label: str
    make: Callable[[], tuple]
    kwargs: dict = field(default_factory=dict)

    def args(self) -> tuple:
        out = self.make()
        return out if isinstance(out, tuple) else (out,)

    def call_text(self, fn_name: str) -> str:
        parts = ([f"<{self.label}>"] if self.label else []) + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{fn_name}({', '.join(parts)})"

    def with_kwargs(self, **kwargs) -> "Input":
        return Input(self.label, self.make, {**self.kwargs, **kwargs})


# ---------------------------------------------------------------- probe side

def record(fn: Callable, args: tuple = (), kwargs: dict | None = None) -> dict:
    """Call fn(*args, **kwargs) and record what happened as plain-ready data:
    the result (or the exception record), whether every tensor argument kept its
    values, and whether the result is one of the argument objects."""
    kwargs = kwargs or {}
    watched = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    before = [a.clone() for a in watched]
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # judged in the parent
        return {"result": raised(e), "unchanged": all(same_values(a, b) for a, b in zip(watched, before)),
                "same_object": False}
    same = any(out is a for a in watched)
    return {"result": out, "unchanged": all(same_values(a, b) for a, b in zip(watched, before)),
            "same_object": same}


# ---------------------------------------------------------------- judge side

def explain(got: dict) -> tuple[str, str | None]:
    """A sentence and a hint for an exception record from `raised()`."""
    kind, msg = got["__raised__"], got["message"]
    if kind == "NotImplementedError":
        return "is " + STUB_MESSAGE, STUB_HINT
    if kind == "TypeError" and ("argument" in msg or "positional" in msg):
        return (f"could not be called as the contract says (TypeError: {msg})",
                "Keep the parameter names and order of the stub's signature.")
    if kind in ("RecursionError", "MemoryError"):
        return (f"ran out of resources ({kind})", "Look for an unbounded loop or recursion.")
    return (f"raised {kind}: {msg}", None)


def result_of(rec: dict, call: str, hint: str | None = None, *, expected: Any = None) -> Any:
    """The recorded result, or a Fail saying the call raised (and what that usually means)."""
    got = rec["result"]
    if is_stub(got):   # not a wrong answer: nothing to compare yet, so no expected/got lines
        sentence, generic = explain(got)
        raise Fail(f"{call} {sentence}", hint=generic)
    if is_raised(got):
        sentence, generic = explain(got)
        raise Fail(f"{call} {sentence}", expected=expected, got=describe(got), hint=generic or hint)
    return got


def value_forms(value: Any) -> list[str]:
    """Ways a message may reasonably show `value`: repr, str; for containers their
    length or an item; for floats a few roundings (nan/inf spelled either way); for an
    empty string the word "empty"; for tensors their shape or dtype; for other objects
    their type name."""
    forms = {repr(value), str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            forms |= {"nan", "NaN"}
        elif math.isinf(value):
            forms |= {"inf", "Infinity", "infinity"}
        else:
            forms |= {f"{value:g}", f"{value:.6g}", f"{value:.2f}"}
    if isinstance(value, (list, tuple, dict, set, str)) and not isinstance(value, str):
        forms.add(str(len(value)))
        for item in list(value)[:32]:  # a message may show the offending item rather than the list
            if isinstance(item, str):
                forms |= {repr(item), f'"{item}"'} | ({"''", "empty"} if not item.strip() else set())
            elif item is None or isinstance(item, (int, float)):
                forms |= {f for f in value_forms(item) if f != type(item).__name__}
    if isinstance(value, str):
        forms.add(value.strip())
        if not value.strip():
            forms |= {"''", '""', "empty", "blank", "whitespace"}
    if isinstance(value, torch.Tensor):
        forms |= {str(tuple(value.shape)), str(list(value.shape)), str(value.dtype),
                  str(value.dtype).replace("torch.", "")}
        if value.dtype.is_floating_point and bool(torch.isnan(value).any()):
            forms |= {"nan", "NaN"}  # naming the bad entries shows what was wrong with the tensor
        if value.dtype.is_floating_point and bool(torch.isinf(value).any()):
            forms |= {"inf", "Inf"}
    if value is not None and not isinstance(value, (bool, int, float, str, list, tuple, dict, set, torch.Tensor)):
        # only for other objects: the type name of a number, string, container or tensor is no
        # evidence of the value ("int" is inside "integer", "list" inside "a list of strings")
        forms.add(type(value).__name__)
    return [f for f in forms if f]


def _shown(value: Any) -> str:
    """A short text for a value in a message: a tensor by its shape and dtype."""
    if isinstance(value, torch.Tensor):
        return f"<tensor of shape {tuple(value.shape)}, {str(value.dtype).replace('torch.', '')}>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def rejects(rec: dict, call: str, param: str, value: Any, hint: str | None = None, *,
            exc: str = "ValueError", show_value: bool = True) -> None:
    """The call must raise ValueError (or `exc`) whose message names `param` and
    shows the value it got, in any reasonable form (show_value=False: a contract that
    asks only for the parameter's name)."""
    got = rec["result"]
    if is_stub(got):
        sentence, generic = explain(got)
        raise Fail(f"{call} {sentence}", hint=generic)
    if not is_raised(got) or (exc == "ValueError" and not got.get("is_value_error")) \
            or (exc != "ValueError" and got["__raised__"] != exc):
        raise Fail(f"{call} should raise {exc} for `{param}`={_shown(value)}", expected=exc,
                   got=describe(got) if is_raised(got) else "it returned a result",
                   hint=hint or f"Check `{param}` first and raise {exc} with a message naming it.")
    msg = got["message"]
    if param not in msg:
        raise Fail(f"the error of {call} should name the parameter `{param}`",
                   expected=f"a message naming `{param}`", got=msg,
                   hint=f"Write it like: \"`{param}` must be ..., got {_shown(value)}.\"")
    if show_value and not any(form in msg for form in value_forms(value)):
        raise Fail(f"the error of {call} should show the value it got ({_shown(value)})",
                   expected=f"a message showing {_shown(value)}", got=msg,
                   hint=f"End the message with \", got {{{param}!r}}.\" so the caller sees the bad value.")


def unchanged(rec: dict, call: str, *, allow_same_object: bool = False) -> None:
    """The call left its tensor inputs unchanged and returned a new object."""
    if not rec.get("unchanged", True):
        raise Fail(f"{call} changed a tensor it was given",
                   hint="Never modify an input in place: use out-of-place ops (x / t, masked_fill, clone()).")
    if rec.get("same_object") and not allow_same_object:
        raise Fail(f"{call} returned its input tensor itself, not a new one",
                   hint="Return a new tensor (clone() when nothing changes), so callers can change the "
                        "result without changing the input.")


def reference_rejects(reference: Callable, args: tuple, kwargs: dict, call: str) -> None:
    """Grader integrity, checked in the judge: the reference must itself reject an input
    that a case demands be rejected (so judge and reference can never disagree, and a
    planted bug in the reference's validation fails the correct solution)."""
    try:
        reference(*args, **copy.deepcopy(kwargs))
    except ValueError:
        return
    raise Fail(f"grader error: the reference accepts {call}, which this case says must be rejected",
               hint="This is a fault in the grader, not in your code: tell the course staff.")


# ---------------------------------------------------------------- the grader's count of KV blocks

class Ledger:
    """The grader's own count of a pool's blocks, put in front of its allocator.

    Every call is passed on to the allocator it wraps; when one returns normally the ledger
    counts the ids it handed out (allocate +1) or was given (share +1, free -1 per id, for ids
    it holds). Blocks in use = ids with a count above 0, from the ids themselves, never from
    the allocator's num_free / num_used / refcount, which the student's code computes (and
    could make lie).

    The ledger lives in the student's process, and code called through it can reach it (the
    pool it is given holds it; a frame walk finds it). So the count is kept twice: on the
    ledger, and in a second record off it (_SHADOW) that the ledger does not name; counts()
    fails when the two differ. A change to the one the student's code can see is caught;
    same-process bookkeeping cannot be made tamper-proof, and preflight.review_of flags code
    that walks frames for an instructor to read."""

    __slots__ = ("_inner", "_held", "_most", "num_blocks", "__weakref__")

    def __init__(self, inner, num_blocks):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_held", {})
        object.__setattr__(self, "_most", 0)
        object.__setattr__(self, "num_blocks", num_blocks)
        _SHADOW[self] = ({}, [0])

    def __getattr__(self, name):                 # num_free, refcount, ...: the allocator's own
        return getattr(self._inner, name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    def _count(self, block_ids, step, new):
        shadow, most = _SHADOW.get(self, ({}, [0]))
        for held in (self._held, shadow):
            for b in list(block_ids):
                b = int(b) if isinstance(b, int) else ("not an int", repr(b))
                if b in held or new:
                    held[b] = held.get(b, 0) + step
                    if held[b] <= 0:
                        del held[b]
        object.__setattr__(self, "_most", max(self._most, len(self._held)))
        most[0] = max(most[0], len(shadow))

    def allocate(self, n):
        got = _ids(self._inner.allocate(n))
        self._count(got, 1, new=True)
        return got

    def share(self, block_ids):
        block_ids = _ids(block_ids)
        out = self._inner.share(block_ids)
        self._count(block_ids, 1, new=False)
        return out

    def free(self, block_ids):
        block_ids = _ids(block_ids)
        out = self._inner.free(block_ids)
        self._count(block_ids, -1, new=False)
        return out

    def counts(self):
        """{"num_free", "num_used", "high_water"} by the ledger's count (an id outside
        0..num_blocks-1 is counted as used too: the pool may look over-full, never free)."""
        shadow, most = _SHADOW.get(self, (None, [None]))
        if shadow != self._held or most[0] != self._most:
            raise Fail("the grader's count of this pool's blocks was changed while your code ran",
                       hint="Use the pool's allocator through its methods only, and leave the objects "
                            "that call your code as they are.")
        used = len(shadow)
        return {"num_free": self.num_blocks - used, "num_used": used, "high_water": most[0]}


# each Ledger's second count ({id: users}, [high water]), off the ledger object (see Ledger)
_SHADOW: "weakref.WeakKeyDictionary[Ledger, tuple[dict, list]]" = weakref.WeakKeyDictionary()
_COUNTS = Ledger.counts          # as defined here, whatever the class attribute is later


def _ids(ids):
    """A list or tuple as it is; any other iterable (a generator...) read once, into a list,
    so the allocator and the ledger see the same ids."""
    return ids if isinstance(ids, (list, tuple)) else list(ids)


def audited(pool):
    """`pool` with a Ledger in front of its `allocator` (before any cache is built on it)."""
    ledger = Ledger(pool.allocator, pool.num_blocks)
    pool.allocator = ledger
    if pool.__dict__.get("allocator") is not ledger:
        raise Fail("the pool's `allocator` attribute cannot be set (KVPool was changed)",
                   hint="Keep the setup cell's KVPool as it is: `pool.allocator` is a plain attribute.")
    return pool


def ledger_counts(pool) -> dict:
    """{"num_free", "num_used", "high_water"} of a pool built by audited(): the Ledger's count,
    made only worse by the allocator's own (an allocator that lost blocks inside a failed
    call says so itself; one that claims more free blocks than the ledger counts is ignored)."""
    a = getattr(pool, "__dict__", {}).get("allocator")
    if type(a) is not Ledger:
        raise Fail("the pool's allocator was replaced while the grader was counting its blocks",
                   hint="Use `pool.allocator` as it is; never assign another allocator to the pool.")
    counts = _COUNTS(a)
    try:
        free, most = a.num_free, a.high_water
    except Exception:
        return counts
    if type(free) is int and free < counts["num_free"]:
        counts["num_free"], counts["num_used"] = free, a.num_blocks - free
    if type(most) is int and most > counts["high_water"]:
        counts["high_water"] = most
    return counts


# ---------------------------------------------------------------- the shipped model

@contextlib.contextmanager
def one_thread():
    """Run torch on one CPU thread, and restore the caller's setting after.

    The 1M-parameter tiny model gains nothing from a second thread, and on a busy
    2-core machine a descheduled worker thread can stall each call by 100+ ms.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@lru_cache(maxsize=1)
def shipped_model():
    """(transformers model, tokenizer) of datasets/tiny-model on the CPU, loaded once
    per process, with transformers' progress bar off (no "Loading weights" bar on
    stderr in a test cell)."""
    from transformers.utils import logging as hf_logging

    from course.tiny_model import load_tiny_model

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return load_tiny_model("cpu")
    finally:
        if bar:
            hf_logging.enable_progress_bar()


@lru_cache(maxsize=1)
def shipped_decoder():
    """(CourseDecoder, tokenizers.Tokenizer, eos id) of datasets/tiny-model on the CPU,
    loaded once per process straight from its files: the same weights and token ids as
    shipped_model() gives (autograder/tests/test_memo.py compares them), without the
    seconds that importing transformers' model code costs a sandbox's start."""
    from tokenizers import Tokenizer

    from course.decoder import CourseDecoder
    from course.tiny_model import TINY_MODEL_DIR

    tokenizer = Tokenizer.from_file(str(Path(TINY_MODEL_DIR) / "tokenizer.json"))
    return CourseDecoder.from_safetensors(TINY_MODEL_DIR), tokenizer, int(tokenizer.token_to_id("<|endoftext|>"))
