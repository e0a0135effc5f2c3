"""Regenerate the student release labs/labNN/ from solutions/labNN/ with nbgrader.

    python -m autograder.release lab00 lab01 ...

Runs the real `nbgrader generate_assignment` in a scratch copy of the course
(so the repository's gradebook is untouched), then copies the generated
notebooks into labs/. `release_to(folder)` is what the sync test compares with.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def nbgrader_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run_nbgrader(cwd, *args, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real `nbgrader ARGS...` in course root `cwd`; raise with its output if it fails."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def release_to(labs: list[str], out: Path) -> Path:
    """Generate `labs` into out/labs/labNN (a scratch course root). Returns out/labs."""
    out = Path(out)
    (out / "solutions").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", out / "nbgrader_config.py")
    for lab in labs:
        src = ROOT / "solutions" / lab
        if not src.is_dir():
            raise ValueError(f"`lab` {lab!r} has no folder solutions/{lab}.")
        shutil.copytree(src, out / "solutions" / lab, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        proc = run_nbgrader(out, "generate_assignment", lab, "--force")
        if not (out / "labs" / lab).is_dir():
            raise RuntimeError(f"nbgrader generate_assignment {lab} wrote no labs/{lab}:\n{proc.stdout[-3000:]}")
    return out / "labs"


def main(argv=None) -> int:
    labs = list(argv if argv is not None else sys.argv[1:])
    if not labs:
        labs = sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]"))
    with tempfile.TemporaryDirectory() as tmp:
        generated = release_to(labs, Path(tmp))
        for lab in labs:
            dest = ROOT / "labs" / lab
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(generated / lab, dest)
            print(f"released {lab} -> labs/{lab}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
