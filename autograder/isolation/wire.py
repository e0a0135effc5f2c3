"""The wire protocol between the grader (parent) and the sandbox, parent side.

Two channels per worker:
  * control socket (parent <-> zygote, a trusted process the student's code never runs
    in): JSON lines; file descriptors for a new child travel with a `fork` line
    (SCM_RIGHTS). The zygote reports `forked` and `exit` (the child's wait status) here.
  * per child: a command pipe (parent -> child: `probe`, `bye`) and a results pipe
    (child -> parent: `cell_start`, `cell`, `setup_done`, `ready`, `answer`, `fatal`).
    The child runs the student's code, so everything on the results pipe is untrusted
    data: it is parsed as JSON (never pickle), bounded in size, and only ever becomes
    an observation the parent judges, or a problem text. A message can never make the
    parent report a grader error once the student's first cell has started.
"""
from __future__ import annotations

import array
import json
import os
import select
import socket
import time

from .limits import MAX_MESSAGE, MiB

PROTOCOL = 2


def encode(msg: dict) -> bytes:
    return (json.dumps(msg) + "\n").encode()


def mib(n: int) -> str:
    """A size for a message: '63 MiB', '1.5 MiB'."""
    return f"{n / MiB:.1f}".removesuffix(".0") + " MiB"


class TooLarge(OverflowError):
    """A line longer than the reader's limit: it was neither kept nor parsed."""

    def __init__(self, limit: int):
        super().__init__(f"a message larger than {mib(limit)}")
        self.limit = limit


class LineReader:
    """JSON lines from one fd; junk lines are skipped. A line longer than `limit` raises
    TooLarge as soon as that many bytes of it are buffered: the reader never holds more
    than `limit` plus one read, and never parses such a line."""

    CHUNK = 256 * 1024

    def __init__(self, fd: int, nonce: str | None = None, limit: int = MAX_MESSAGE):
        self.fd, self.nonce, self.limit = fd, nonce, limit
        self.buf = bytearray()
        self.eof = False
        self.total = 0                  # bytes read from fd, for the record of what a child cost

    def pop(self) -> dict | None:
        """The next complete, well-formed message already buffered (None if there is none)."""
        while True:
            i = self.buf.find(b"\n")
            if i < 0 and len(self.buf) > self.limit or i > self.limit:
                self.buf = bytearray()
                raise TooLarge(self.limit)
            if i < 0:
                return None
            line = bytes(self.buf[:i])
            del self.buf[:i + 1]
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(msg, dict) and (self.nonce is None or msg.get("n") == self.nonce):
                return msg

    def fill(self) -> None:
        data = os.read(self.fd, self.CHUNK)
        if not data:
            self.eof = True
        self.total += len(data)
        self.buf += data


def wait_readable(fds, timeout: float) -> list:
    if timeout <= 0:
        return []
    r, _, _ = select.select(list(fds), [], [], min(timeout, 1.0))
    return r


def send_fds(sock: socket.socket, msg: dict, fds: list[int]) -> None:
    data = encode(msg)
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def deadline_after(seconds: float) -> float:
    return time.monotonic() + seconds
