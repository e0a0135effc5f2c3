"""Start JupyterLab on labs/: the one command `make lab` runs (and the test starts).

    python -m course.lab_server [--port 8888] [--ip 127.0.0.1] [--token TOKEN] [--no-browser]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"


def argv(port: int = 8888, ip: str = "127.0.0.1", token: str | None = None, browser: bool = True) -> list[str]:
    """The command line of the lab server, shared by `make lab` and the tests."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"`port` must be an integer in [0, 65535], got {port!r}.")
    cmd = [sys.executable, "-m", "jupyterlab",
           f"--ServerApp.root_dir={LABS}",
           f"--ServerApp.ip={ip}",
           f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0" if port else "--ServerApp.port_retries=50",
           f"--ServerApp.open_browser={'True' if browser else 'False'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--ServerApp.allow_root=True")  # containers and CI often run as root
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    return cmd


def main(args=None) -> int:
    ap = argparse.ArgumentParser(description="Start JupyterLab on the course's labs/ folder.")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8888")))
    ap.add_argument("--ip", default="127.0.0.1")
    ap.add_argument("--token", default=None)
    ap.add_argument("--no-browser", action="store_true")
    ns = ap.parse_args(args)
    cmd = argv(ns.port, ns.ip, ns.token, not ns.no_browser)
    os.chdir(ROOT)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
