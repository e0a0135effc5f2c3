"""`make help` lists every command the README tells a reader to run."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MAKE_COMMAND = re.compile(r"\bmake ([a-z][a-z0-9-]*)")
DOCUMENTED = re.compile(r"^([a-z0-9][a-z0-9-]*):.*## ", re.MULTILINE)


def readme_targets() -> set[str]:
    return set(MAKE_COMMAND.findall((ROOT / "README.md").read_text(encoding="utf-8")))


def documented_targets() -> set[str]:
    """The Makefile's targets with a `## description`: what the help rule is meant to list."""
    return set(DOCUMENTED.findall((ROOT / "Makefile").read_text(encoding="utf-8")))


def test_readme_names_make_commands():
    assert {"lab", "test", "e2e", "help"} <= readme_targets()


def test_every_readme_command_has_a_description_in_the_makefile():
    missing = sorted(readme_targets() - documented_targets())
    assert not missing, f"the README names `make {missing[0]}`, which has no `## description` in the Makefile"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_help_lists_every_readme_command():
    out = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    missing = sorted(readme_targets() - listed)
    assert not missing, f"`make help` does not list {', '.join(missing)} (named in the README)"
    assert listed == documented_targets(), "`make help` must list exactly the targets with a `## description`"
