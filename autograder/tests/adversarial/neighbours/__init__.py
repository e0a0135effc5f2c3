"""An honest lab00 submission and two classmates that each send 63 MiB, for the checks that
one hostile submission costs its neighbours nothing but noise (test_neighbour.py) and for
benchmarks/bench_neighbour.py, which times the same batches.

    b_huge_result     ../huge_result.py with SIZE raised to 63 MiB: the child refuses to send
                      an observation over the message limit
    c_huge_raw_write  ../huge_raw_write.py: 63 MiB written into every pipe, past that check
"""
from __future__ import annotations

from pathlib import Path

from .. import sources

HONEST = "a_honest"
HOSTILE = ("b_huge_result", "c_huge_raw_write")


def huge_result_63_mib() -> str:
    code = sources()["huge_result"].read_text(encoding="utf-8")
    if "SIZE = 4 << 20" not in code:
        raise ValueError("huge_result.py no longer sets SIZE = 4 << 20")
    return code.replace("SIZE = 4 << 20", "SIZE = 63 << 20")


def build(dest: Path) -> dict[str, Path]:
    """student -> notebook (DEST/<student>/lab00.ipynb) for the honest one and the two hostile ones."""
    from ...submissions import with_solution_code, write
    code = {HONEST: sources()["honest"].read_text(encoding="utf-8"), "b_huge_result": huge_result_63_mib(),
            "c_huge_raw_write": sources()["huge_raw_write"].read_text(encoding="utf-8")}
    return {s: write(with_solution_code("lab00", {}, first=c), Path(dest) / s / "lab00.ipynb") for s, c in code.items()}


def verdicts(rec: dict) -> dict:
    """What a grade is made of: status, score, and every case's verdict and message."""
    return {"status": rec["status"], "score": rec["score"], "max_score": rec["max_score"],
            "cases": [(t["name"], c["name"], c["passed"], c["message"]) for t in rec["tests"] for c in t["cases"]]}
