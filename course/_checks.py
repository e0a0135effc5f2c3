"""Argument checks shared by every public function of the course library.

One message template everywhere, and the check always matches the message:

    "`top_p` must be in (0, 1], got 1.5."

Each helper raises ValueError (never a TypeError from deep inside torch) and
returns the value it checked, so a caller can write `k = check_int("k", k, 1)`.
"""
from __future__ import annotations

import math
from typing import Any, Iterable


def is_int(value) -> bool:
    """A real integer: bool is an int subclass in Python, but never a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or float (not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _interval(lo, hi, lo_open: bool, hi_open: bool) -> str:
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    fmt = lambda x: "inf" if x == math.inf else "-inf" if x == -math.inf else repr(x)  # noqa: E731
    return f"{left}{fmt(lo)}, {fmt(hi)}{right}"


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    """Raise "`name` must be an integer >= minimum, got value." unless it is one
    (or "an integer in [minimum, maximum]" when both bounds are given)."""
    ok = is_int(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        if minimum is not None and maximum is not None:
            what = f"an integer in [{minimum}, {maximum}]"
        elif minimum is not None:
            what = f"an integer >= {minimum}"
        elif maximum is not None:
            what = f"an integer <= {maximum}"
        else:
            what = "an integer"
        raise ValueError(f"`{name}` must be {what}, got {value!r}.")
    return value


def check_number(name: str, value, lo: float = -math.inf, hi: float = math.inf, *,
                 lo_open: bool = False, hi_open: bool = False, finite: bool = True) -> float:
    """Raise "`name` must be a number in [lo, hi], got value." unless `value` is a
    real number (not bool, not NaN; finite unless finite=False) inside the interval."""
    ok = is_number(value) and not (isinstance(value, float) and math.isnan(value))
    if ok and finite and not math.isfinite(value):
        ok = False
    if ok:
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        if lo == -math.inf and hi == math.inf:
            what = "a finite number" if finite else "a number"
        else:
            what = f"a number in {_interval(lo, hi, lo_open, hi_open)}"
        raise ValueError(f"`{name}` must be {what}, got {value!r}.")
    return value


def check_choice(name: str, value, choices: Iterable[Any]) -> Any:
    """Raise "`name` must be one of 'a', 'b', got 'c'." unless value is in choices."""
    choices = list(choices)
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"`{name}` must be one of {', '.join(repr(c) for c in choices)}, got {value!r}.")
    return value


def check_type(name: str, value, types, what: str) -> Any:
    """Raise "`name` must be <what>, got <type name>." unless isinstance(value, types)."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise ValueError(f"`{name}` must be {what}, got {type(value).__name__} {_short(value)}.")
    return value


def check_optional(name: str, value, check, *args, **kwargs):
    """None passes; anything else goes through `check(name, value, ...)`."""
    return None if value is None else check(name, value, *args, **kwargs)


def check_tensor(name: str, value, *, dims: Iterable[int] | None = None, floating: bool | None = None,
                 integer: bool | None = None):
    """Raise "`name` must be a 2-D floating torch.Tensor, got ..." unless value is a
    tensor with an allowed number of dimensions and the right kind of dtype."""
    import torch  # local: keeps this module importable without torch for docs tools

    dims = None if dims is None else tuple(dims)
    parts = []
    if dims is not None:
        parts.append(" or ".join(f"{d}-D" for d in dims))
    if floating:
        parts.append("floating")
    if integer:
        parts.append("integer")
    what = "a " + " ".join(parts + ["torch.Tensor"]) if parts else "a torch.Tensor"
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"`{name}` must be {what}, got {type(value).__name__} {_short(value)}.")
    bad = (dims is not None and value.dim() not in dims) \
        or (floating and not value.dtype.is_floating_point) \
        or (integer and (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool))
    if bad:
        raise ValueError(f"`{name}` must be {what}, got a tensor of shape {tuple(value.shape)} "
                         f"and dtype {value.dtype}.")
    return value


def _as_tuple(types):
    return types if isinstance(types, tuple) else (types,)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
