"""Clocks. Timing code takes a clock argument so tests can drive time by hand."""
from __future__ import annotations

import time

from ._checks import check_number


class FakeClock:
    """A deterministic monotonic clock, advanced only by hand.

    >>> clock = FakeClock()
    >>> clock.advance(0.25); clock()
    0.25
    """

    def __init__(self, start: float = 0.0) -> None:
        _check_finite("start", start)
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by `seconds` (>= 0) and return the new time."""
        _check_finite("seconds", seconds)
        if seconds < 0:
            raise ValueError(f"`seconds` must be >= 0 (a monotonic clock never goes back), got {seconds}.")
        self._now += float(seconds)
        return self._now

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now})"


def monotonic() -> float:
    """The real clock for demos: seconds from an arbitrary start, never going back."""
    return time.perf_counter()


def _check_finite(name: str, value) -> None:
    check_number(name, value)
