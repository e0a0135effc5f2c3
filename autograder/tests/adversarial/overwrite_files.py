"""Tries to change what the grader reads: the graders, the reference, the fixtures (the
repository's and the staged copies), by opening them for writing, removing or renaming
them. Each success would print WROTE; the function returns a wrong answer."""
import os
import sys
from pathlib import Path

import course

EXPECT = {"max_score": 0, "output_has": ["TRIED"], "output_not": ["WROTE"]}

REPO = Path(sys.executable).resolve().parents[2]
GUESSES = [Path(course.__file__).resolve().parent.parent, Path(sys.prefix).parent, REPO]
targets = []
for root in GUESSES:
    targets += [root / "autograder" / "graders" / "lab00.py", root / "autograder" / "reference" / "lab00.py",
                root / "autograder" / "core.py", root / "datasets" / "fixtures" / "peaked.json"]
fixtures = Path(course.fixtures.FIXTURES_DIR)
targets += [fixtures / "peaked.json", fixtures.parent.parent / "autograder" / "graders" / "lab00.py"]


def attempt():
    for p in targets:
        for how in ("append", "remove", "rename", "chmod"):
            try:
                if how == "append":
                    with open(p, "a") as f:
                        f.write("")
                elif how == "remove":
                    os.remove(str(p) + ".does-not-exist")
                    continue
                elif how == "rename":
                    os.rename(p, p)
                else:
                    os.chmod(p, os.stat(p).st_mode)
                print("WROTE", how, p)
            except Exception as e:  # noqa: BLE001
                print("TRIED", how, p, type(e).__name__)


attempt()


def greedy_token(logits):
    attempt()
    return 0
