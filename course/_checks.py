"""Argument checks shared by the course modules; messages follow one template."""
from __future__ import annotations


def is_int(value) -> bool:
    """A real integer: bool is an int subclass in Python, but never a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value, minimum: int) -> None:
    """Raise "`name` must be an integer >= minimum, got value." unless it is one."""
    if not is_int(value) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}.")
