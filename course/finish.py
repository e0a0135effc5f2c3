"""Finish reasons: why a generation ended. One enum shared by every lab.

The wire names follow the OpenAI / vLLM conventions (`stop`, `length`,
`content_filter`) and extend them with `cancelled`, `timeout` and `error`,
which vLLM reports as `abort` and the OpenAI API does not report at all.
"""
from __future__ import annotations

from enum import Enum


class FinishReason(str, Enum):
    STOP = "stop"                      # EOS, a stop token id, or a stop string: a normal end
    LENGTH = "length"                  # max_tokens reached: output may be cut mid-object
    CANCELLED = "cancelled"            # the client cancelled between two steps
    TIMEOUT = "timeout"                # a deadline on the (injected) clock passed
    CONTENT_FILTER = "content_filter"  # a filter rejected a token or the text
    ERROR = "error"                    # the model raised or produced NaN logits

    def __str__(self) -> str:  # str(FinishReason.STOP) == "stop", the wire name
        return self.value

    @property
    def is_normal(self) -> bool:
        """True only for `stop`: the model itself decided it was done."""
        return self is FinishReason.STOP

    @classmethod
    def parse(cls, value: "FinishReason | str") -> "FinishReason":
        """Accept an enum member or its wire name; reject anything else clearly."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value))
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ValueError(f"`finish_reason` must be one of {names}, got {value!r}.") from None
