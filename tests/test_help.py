"""Every command answers `--help` with a usage text and exit status 0, never a traceback: each
`python -m` entry point of course/ and autograder/, every script the Makefile runs, every
benchmark and the hub's scripts (found by their `if __name__ == "__main__"`, so a new one is
covered without being listed here)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAIN = re.compile(r'^if __name__ == "__main__":', re.M)


def _has_main(p: Path) -> bool:
    return bool(MAIN.search(p.read_text(encoding="utf-8")))


def commands() -> dict[str, list[str]]:
    out = {}
    for pkg in ("course", "autograder"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT)
            if {"tests", "variants", "graders", "reference"} & set(rel.parts):
                continue
            if p.name == "__main__.py":
                module = ".".join(rel.parent.parts)
            elif _has_main(p):
                module = ".".join(rel.with_suffix("").parts)
            else:
                continue
            out[f"python -m {module}"] = ["-m", module]
    for folder in ("benchmarks", "hub", "datasets", "datasets/generators"):
        for p in sorted((ROOT / folder).glob("*.py")):
            if _has_main(p):
                out[str(p.relative_to(ROOT))] = [str(p)]
    out["python -m autograder.tests.outcomes"] = ["-m", "autograder.tests.outcomes"]
    return out


def test_the_makefile_runs_only_commands_checked_here():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    modules = set(re.findall(r"\$\(PY\) -m ([a-z_.]+)", text)) - {"pip", "pytest", "ipykernel", "jupyterhub"}
    scripts = set(re.findall(r"\$\(PY\) ([a-z_/]+\.py)", text))
    known = commands()
    assert {f"python -m {m}" for m in modules} <= set(known), sorted(modules)
    assert scripts <= set(known), sorted(scripts)


@pytest.mark.parametrize("name", sorted(commands()))
def test_help_exits_0_with_a_usage_text(name):
    p = subprocess.run([sys.executable, *commands()[name], "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    said = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in said and "usage" in said.lower(), f"{name} --help:\n{said[-3000:]}"
