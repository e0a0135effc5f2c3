"""Expected values that need the shipped tiny model, computed once and kept with the graders.

A self-check from the terminal starts two processes: the sandboxed one that runs the
student's code, and the grading one that judges it. When a visible case compares the
student's result with the tiny model's own (lab04's changed positions, lab05's greedy run on
a paged cache), both used to import transformers and load the model: about 4 CPU-seconds
each, and the grading process's copy was waited for. The grading process now reads those
expected values from a small file instead:

    autograder/graders/labNN/_expected.pt     written by `python -m autograder.memo labNN`
                                               (and by `python -m autograder.release labNN`)

A lab lists what goes in its file in autograder/graders/labNN/expected_memo.py (a judge-side
module: not `_*.py`, which the sandboxed child is given with the probes):

    MEMO = {"key": compute, ...}      compute() -> tensors, lists, ints, floats, strings
    SOURCES = ["course/decoder.py", ...]   the files the values are computed from

`expected(lab, key)` returns the file's value when the file was written from the same
model weights and the same SOURCES (their SHA-256 is stored with it), and otherwise
computes the value as before (the file is then stale: a test in autograder/tests says so,
and `make test` fails until it is written again). The values are loaded with
torch.load(weights_only=True): plain data, no code.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_FILE = ROOT / "datasets" / "tiny-model" / "model.safetensors"
FORMAT = 1


def memo_module(lab: str):
    """autograder.graders.labNN.expected_memo, or None when the lab keeps no memo."""
    try:
        return importlib.import_module(f"autograder.graders.{lab}.expected_memo")
    except ModuleNotFoundError as e:
        if e.name != f"autograder.graders.{lab}.expected_memo":
            raise
        return None


def memo_file(lab: str) -> Path:
    return ROOT / "autograder" / "graders" / lab / "_expected.pt"


def fingerprint(lab: str) -> dict:
    """SHA-256 of the model's weights and of each file the lab's memo is computed from, and the
    versions of torch and transformers (a mutated reference, a retrained model or another
    transformers makes the file stale, and the values are computed again)."""
    from importlib.metadata import version
    mod = memo_module(lab)
    files = [MODEL_FILE, *(ROOT / s for s in (mod.SOURCES if mod else ()))]
    return {"format": FORMAT, "torch": version("torch"), "transformers": version("transformers"),
            **{str(f.relative_to(ROOT)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}}


@lru_cache(maxsize=None)
def _stored(lab: str) -> dict | None:
    """The lab's file when it matches today's fingerprint, else None."""
    import torch
    path = memo_file(lab)
    if not path.is_file():
        return None
    data = torch.load(path, weights_only=True)
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint(lab):
        return None
    # current by its fingerprint, so about to be trusted: its bytes must be the ones committed
    # (autograder/kept.py; a file rewritten with a valid fingerprint stops grading here)
    from . import kept
    kept.verify(only=[str(path.relative_to(ROOT))])
    return data["values"]


def is_current(lab: str) -> bool:
    """True when the lab's file exists and was written from today's weights and sources."""
    return _stored(lab) is not None


def expected(lab: str, key: str):
    """The value MEMO[key] computes, from the lab's file when it is current."""
    stored = _stored(lab)
    if stored is not None and key in stored:
        return stored[key]
    return memo_module(lab).MEMO[key]()


def compute_all(lab: str) -> dict:
    mod = memo_module(lab)
    return {key: compute() for key, compute in mod.MEMO.items()}


def write(lab: str) -> Path:
    """Compute every MEMO value of the lab and write its file."""
    import torch
    if memo_module(lab) is None:
        raise ValueError(f"`lab` {lab!r} keeps no memo (no autograder/graders/{lab}/expected_memo.py).")
    path = memo_file(lab)
    torch.save({"fingerprint": fingerprint(lab), "values": compute_all(lab)}, path)
    from . import kept
    kept.write()                      # the new file's digest, committed with it
    _stored.cache_clear()
    return path


def labs() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "autograder" / "graders").glob("lab*/expected_memo.py"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Write the expected values the graders keep for the tiny model.")
    ap.add_argument("labs", nargs="*", help=f"default: {' '.join(labs())}")
    args = ap.parse_args(argv)
    for lab in args.labs or labs():
        print(f"wrote {write(lab).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
