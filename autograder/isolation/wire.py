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

from .limits import MAX_MESSAGE

PROTOCOL = 2


def encode(msg: dict) -> bytes:
    return (json.dumps(msg) + "\n").encode()


class LineReader:
    """JSON lines from one fd; junk lines are skipped, oversized input is an error."""

    def __init__(self, fd: int, nonce: str | None = None):
        self.fd, self.nonce = fd, nonce
        self.buf = bytearray()
        self.eof = False

    def pop(self) -> dict | None:
        """The next complete, well-formed message already buffered (None if there is none)."""
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                if len(self.buf) > MAX_MESSAGE:
                    raise OverflowError("a message larger than 64 MiB")
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
        data = os.read(self.fd, 1 << 20)
        if not data:
            self.eof = True
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
