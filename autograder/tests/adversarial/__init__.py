"""Adversarial submissions for lab00: each file is what a student puts in the
`greedy_token` solution cell. EXPECT says what the standalone grader must do:

    max_score   the most points the submission may get
    output_has  strings that must appear in what the child printed (proof the attack ran)
    output_not  strings that must never appear there (proof each attempt failed)
    problem     a substring one of the report's problems/messages must contain
    needs_os    True when only the OS sandbox (bubblewrap, Landlock) stops this attack; the
                test skips it where the machine has none (weak isolation, refused for credit)
    needs_cc    True when the attack loads native code compiled from native/*.c by `build`
                (a C compiler on the grading machine; skipped without one)

`build(dest)` writes one notebook per file, made from lab00's release notebook with the
solution cell replaced (autograder.tests.submissions.with_solution_code).
"""
from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sources() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HERE.glob("*.py")) if p.stem != "__init__"}


def expectations(path: Path) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path.name} has no EXPECT")


def shared_library(dest: Path) -> bytes:
    """native/run_env_cmd.c compiled into a shared library (b"" without a C compiler)."""
    import shutil
    import subprocess
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return b""
    so = Path(dest) / "libattack.so"
    so.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(HERE / "native" / "run_env_cmd.c")],
                       capture_output=True, timeout=120)
    return so.read_bytes() if r.returncode == 0 else b""


def build(dest: Path) -> dict[str, Path]:
    import base64
    from ..submissions import with_solution_code, write
    out = {}
    blob = base64.b64encode(shared_library(Path(dest) / "_native")).decode()
    for name, path in sources().items():
        code = path.read_text(encoding="utf-8").replace('SO_B64 = ""', f'SO_B64 = "{blob}"', 1)
        nb = with_solution_code("lab00", {}, first=code)
        out[name] = write(nb, Path(dest) / f"{name}.ipynb")
    return out
