"""Start JupyterLab for the course: the one command `make lab` runs (and the tests start).

    python -m course.lab_server [--port 8888] [--ip 127.0.0.1] [--token TOKEN] [--no-browser]
    python -m course.lab_server --instructor      (`make instructor`)

Learner mode (the default) first copies each lab of labs/ into the git-ignored work
folder work/ (a lab or file already there is never overwritten, so a release, a
regenerated labs/ or a course update cannot touch a learner's notebook; a lab that
appears in labs/ later is copied on the next start), then opens JupyterLab on work/
without nbgrader's instructor interface: the formgrader, create-assignment, course-list,
assignment-list and validate extensions are all off (the self-check cell and
`python -m autograder check` replace Validate). Instructor mode opens JupyterLab on
the course root with nbgrader's extensions as installed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"
WORK = ROOT / "work"
CONFIG = ROOT / ".jupyter-runtime" / "learner-config"

# nbgrader registers four server extensions (etc/jupyter/jupyter_server_config.d/nbgrader.json)
# and one lab extension, @jupyter/nbgrader, whose plugins are the formgrader, create-assignment,
# course-list, assignment-list, validate-assignment and the menu.
NBGRADER_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.validate_assignment",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.course_list",
)
NBGRADER_LAB_EXTENSION = "@jupyter/nbgrader"
MODES = ("learner", "instructor")
LAB_DIR = re.compile(r"lab\d\d")


def sync_work(labs: Path = LABS, work: Path = WORK) -> list[str]:
    """Copy into `work` every file of the release `labs` that `work` does not have yet: each
    lab folder (labNN/) and each edition's (zh/labNN/) the first time, and files added to a
    lab later. Never overwrites or deletes anything in `work`. Returns the paths copied,
    relative to `work`."""
    labs, work = Path(labs), Path(work)
    if not labs.is_dir():
        raise ValueError(f"`labs` must be a folder, got {str(labs)!r}.")
    work.mkdir(parents=True, exist_ok=True)
    copied = []
    for src in sorted(labs.rglob("*")):
        rel = src.relative_to(labs)
        if not src.is_file() or src.suffix == ".pyc" or any(
                part in (".ipynb_checkpoints", "__pycache__") for part in rel.parts):
            continue
        if not any(LAB_DIR.fullmatch(part) for part in rel.parts[:-1]):
            continue   # only what is inside a lab folder
        dest = work / rel
        if dest.exists() or dest.is_symlink():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        copied.append(str(rel))
    return copied


def learner_config(config: Path | None = None) -> Path:
    """Write the Jupyter config folder that turns nbgrader's interface off (put first on
    JUPYTER_CONFIG_PATH, it outranks the environment's etc/jupyter). Returns the folder."""
    config = Path(config) if config is not None else CONFIG
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    page = {"disabledExtensions": {NBGRADER_LAB_EXTENSION: True}}
    (config / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=2) + "\n")
    server = {"ServerApp": {"jpserver_extensions": {name: False for name in NBGRADER_SERVER_EXTENSIONS}}}
    (config / "jupyter_server_config.json").write_text(json.dumps(server, indent=2) + "\n")
    return config


def command(port: int = 8888, ip: str = "127.0.0.1", token: str | None = None, browser: bool = True,
            mode: str = "learner", root: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line of the lab server and the environment variables it needs, shared by
    `make lab`, `make instructor`, the tests and the browser tests."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"`port` must be an integer in [0, 65535], got {port!r}.")
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {', '.join(MODES)}, got {mode!r}.")
    root = Path(root) if root is not None else (WORK if mode == "learner" else ROOT)
    # The terminal is a plain (not login) shell, so it keeps this PATH: `python` is the course's.
    shell = shutil.which("bash") or shutil.which("sh") or "sh"
    cmd = [sys.executable, "-m", "jupyterlab",
           f"--ServerApp.root_dir={root}",
           f"--ServerApp.ip={ip}",
           f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0" if port else "--ServerApp.port_retries=50",
           f"--ServerApp.open_browser={'True' if browser else 'False'}",
           f"--ServerApp.terminado_settings={json.dumps({'shell_command': [shell]})}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--ServerApp.allow_root=True")  # containers and CI often run as root
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    env = {"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")}
    if mode == "learner":
        config = learner_config()
        others = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(config)] + others)
    return cmd, env


def argv(port: int = 8888, ip: str = "127.0.0.1", token: str | None = None, browser: bool = True) -> list[str]:
    """The learner-mode command line alone (see `command` for its environment)."""
    return command(port, ip, token, browser)[0]


def main(args=None) -> int:
    ap = argparse.ArgumentParser(description="Start JupyterLab for the course (learner mode on work/ by default).")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8888")))
    ap.add_argument("--ip", default="127.0.0.1")
    ap.add_argument("--token", default=None)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--instructor", action="store_true",
                    help="open the course root with nbgrader's formgrader and create-assignment tools")
    ap.add_argument("--work", default=str(WORK), help=f"the learner's work folder (default {WORK})")
    ns = ap.parse_args(args)
    mode = "instructor" if ns.instructor else "learner"
    work = Path(ns.work).resolve()
    if mode == "learner":
        copied = sync_work(LABS, work)
        labs_copied = sorted({os.path.dirname(c) for c in copied})
        if labs_copied:
            print(f"copied into {work}: {', '.join(labs_copied)} (your own copies; `make release` never touches them)")
        print(f"JupyterLab opens on {work}: your work lives there, apart from the release in labs/.", flush=True)
    else:
        print(f"Instructor mode: JupyterLab on {ROOT} with nbgrader's formgrader. "
              "Formgrader's 'generate' rewrites labs/; learners work in work/, which it never touches.")
    cmd, env = command(ns.port, ns.ip, ns.token, not ns.no_browser, mode=mode,
                       root=work if mode == "learner" else None)
    os.chdir(work if mode == "learner" else ROOT)   # a new terminal opens here
    os.execve(cmd[0], cmd, {**os.environ, **env})
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
