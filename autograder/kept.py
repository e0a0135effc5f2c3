"""The files the graders read expected values or inputs from, checked against digests kept with
the graders: a file changed by anyone after it was committed stops grading with a message.

    autograder/graders/kept_files.json    {path: SHA-256} of every kept file below

    autograder/graders/labNN/_expected.pt  values kept for the tiny model (autograder/memo.py)
    datasets/fixtures/*.json               the logit fixtures and traces the cases replay
    datasets/tiny-model/*, configs/*/*     the model, its tokenizer, the configs lab05 reads

Why: under nbgrader's autograde a notebook's code can run with the rights of whoever runs
it, and one that rewrote lab04's `_expected.pt` (with a fingerprint the memo accepts) moved
every later student's grade. `verify()` runs before a batch grades anyone and before the memo
trusts a kept file. The manifest is written by `python -m autograder.kept` (and by
`python -m autograder.memo`, which writes `_expected.pt`); a test in autograder/tests checks it
is current, so a change made on purpose is committed with its digest. What it does not stop:
someone who can write the graders can write this manifest too; the sandboxed autograde kernel
(hub/README.md) is what keeps student code from writing either.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "autograder" / "graders" / "kept_files.json"
PATTERNS = ("autograder/graders/lab*/_expected.pt", "datasets/fixtures/*.json", "datasets/tiny-model/*",
            "datasets/configs/*/*")


class KeptFileChanged(RuntimeError):
    """A kept file no longer has the digest committed with the graders."""


def _patterns(lab: str | None) -> tuple[str, ...]:
    """PATTERNS, or those a grading of `lab` reads: the datasets and that lab's own kept values."""
    if lab is None:
        return PATTERNS
    return tuple(p.replace("lab*", lab) for p in PATTERNS)


def files(root: Path = ROOT, lab: str | None = None) -> list[str]:
    """Every kept file (or every one a grading of `lab` reads), relative to the repository, sorted."""
    return sorted({str(p.relative_to(root)) for pattern in _patterns(lab) for p in root.glob(pattern) if p.is_file()})


def digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def committed(root: Path = ROOT) -> dict:
    manifest = root / MANIFEST.relative_to(ROOT)
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def changed(root: Path = ROOT, only: list[str] | None = None, lab: str | None = None) -> list[str]:
    """The kept files (those of `only`, or those a grading of `lab` reads) whose bytes differ
    from their committed digest, or that appeared or vanished since."""
    from fnmatch import fnmatchcase
    want = committed(root)
    listed = {n for n in want if any(fnmatchcase(n, p) for p in _patterns(lab))}
    names = sorted(set(only)) if only is not None else sorted(listed | set(files(root, lab)))
    out = []
    for name in names:
        p = root / name
        if name not in want or not p.is_file() or digest(p) != want[name]:
            out.append(name)
    return out


def verify(root: Path = ROOT, only: list[str] | None = None, lab: str | None = None) -> None:
    """Raise KeptFileChanged, naming each file, unless every kept file (of `only`, or that a
    grading of `lab` reads) has its committed digest."""
    bad = changed(root, only, lab)
    if bad:
        raise KeptFileChanged(
            "grading stopped: these files the graders read differ from the digests committed with them in "
            f"{MANIFEST.relative_to(ROOT)}:\n" + "\n".join(f"  {b}" for b in bad) +
            "\nSomeone changed them after they were committed (a notebook run as you, under nbgrader's autograde, "
            "can). Restore them (`git checkout -- <file>`, or `python -m autograder.memo LAB` for _expected.pt); "
            "if the change is yours and meant, run `python -m autograder.kept` and commit the manifest.")


def write(root: Path = ROOT) -> Path:
    manifest = root / MANIFEST.relative_to(ROOT)
    manifest.write_text(json.dumps({name: digest(root / name) for name in files(root)}, indent=1, sort_keys=True)
                        + "\n", encoding="utf-8")
    return manifest


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m autograder.kept",
                                 description="Write the digests of the files the graders read (or, with --check, "
                                             "list those that changed and exit 1).")
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    if args.check:
        bad = changed()
        print("\n".join(bad) if bad else "every kept file has its committed digest")
        return 1 if bad else 0
    print(f"wrote {write().relative_to(ROOT)} ({len(files())} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
