"""Helpers for tests that look at the lab notebooks."""
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def lab_names() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]") if list(p.glob("*.ipynb")))


def notebooks(folder: str) -> list[Path]:
    return sorted((ROOT / folder).glob("lab[0-9][0-9]/*.ipynb"))


def read(path: Path):
    return nbformat.read(str(path), as_version=4)
