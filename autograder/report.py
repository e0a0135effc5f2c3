"""Human-readable reports of TestResults, shared by every harness."""
from __future__ import annotations

from .core import TestResult, describe


def case_line(c) -> str:
    mark = "PASS" if c.passed else "FAIL"
    where = f" [fixture {c.fixture}]" if c.fixture else ""
    head = f"  {mark} {c.name}{where} ({c.points:g}/{c.max_points:g})"
    if c.passed:
        return head
    lines = [head, f"       {c.message}"]
    if c.expected is not None or c.got is not None:
        lines.append(f"       expected: {describe(c.expected)}")
        lines.append(f"       got:      {describe(c.got)}")
    if c.hint:
        lines.append(f"       hint: {c.hint}")
    return "\n".join(lines)


def test_text(r: TestResult, *, title: str | None = None) -> str:
    head = title or f"{r.lab} / {r.name}: {r.score:g} of {r.max_score:g} points"
    return "\n".join([head] + [case_line(c) for c in r.cases])
