"""An honest submission gets the same grade whether or not hostile classmates share its batch.

The same honest lab00 notebook is graded alone, then in one batch (three workers, so they
run side by side) with two submissions that each send 63 MiB. Its record (score, every
case's verdict and message) is the same in both, and both hostile ones score 0 with the
message limit named. What the 63 MiB messages cost the grading parent's memory and CPU is
bounded by test_a_hostile_message_costs_the_grading_parent_no_more_than_an_honest_submission
(autograder/tests/test_adversarial.py); how long the honest one waits is measured, not
asserted, by benchmarks/bench_neighbour.py.
"""
from __future__ import annotations

import json

import pytest

from autograder.core import get_tests
from autograder.isolation import Limits

from . import HONEST, HOSTILE, build, verdicts

# roomy limits: building 63 MiB takes the child's own time on a busy machine
LIMITS = Limits(timeout=120, test_timeout=30, case_timeout=15, cell_timeout=30, memory=2 << 30,
                max_deaths_per_test=6)


def _batch(nbs: dict, out) -> dict:
    from autograder.batch import Entry, grade_batch
    s = grade_batch([Entry(k, v) for k, v in nbs.items()], "lab00", out, workers=3, limits=LIMITS, progress=False)
    assert sorted(s.graded) == sorted(nbs) and not s.errors, s.line()
    return {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}


@pytest.mark.slow
def test_the_honest_grade_is_the_same_next_to_two_63_mib_senders(tmp_path):
    nbs = build(tmp_path / "subs")
    alone = _batch({HONEST: nbs[HONEST]}, tmp_path / "alone")
    together = _batch(nbs, tmp_path / "together")
    full = sum(t.points for t in get_tests("lab00").values())
    assert alone[HONEST]["score"] == full, alone[HONEST]["problems"]
    assert verdicts(together[HONEST]) == verdicts(alone[HONEST])
    for name in HOSTILE:
        rec = together[name]
        msgs = [c["message"] for t in rec["tests"] for c in t["cases"]]
        assert rec["status"] == "graded" and rec["score"] == 0, (name, rec["problems"])
        assert any("the limit is 1 MiB" in m for m in msgs), (name, msgs)
