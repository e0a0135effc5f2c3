"""The server `make lab` starts really starts, serves the work folder in learner mode
(no nbgrader instructor interface), and stops; `make instructor` has the formgrader."""
import json
import os
import re
import secrets
import socket
import subprocess
import time
import urllib.request

import pytest

from course import lab_server
from notebooks import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token):
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read().decode())


def start(tmp_path, mode, root=None):
    port, token = free_port(), secrets.token_hex(16)
    cmd, extra = lab_server.command(port=port, ip="127.0.0.1", token=token, browser=False, mode=mode, root=root)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), **extra}
    proc = subprocess.Popen(cmd, cwd=root or ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            status = get(f"{base}/api/status", token)
            assert "started" in status
            return proc, base, token
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited early:\n{proc.stdout.read().decode()[-3000:]}")
            time.sleep(0.5)
    stop(proc)
    pytest.fail("jupyter lab did not answer /api/status within 60 s")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def status_of(url, token) -> int:
    try:
        req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def page_config(base, token) -> dict:
    req = urllib.request.Request(f"{base}/lab", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        html = r.read().decode()
    m = re.search(r'id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


@pytest.mark.slow
def test_learner_mode_serves_the_work_folder_without_nbgrader_tools(tmp_path):
    work = tmp_path / "work"
    lab_server.sync_work(ROOT / "labs", work)
    proc, base, token = start(tmp_path, "learner", root=work)
    try:
        root = get(f"{base}/api/contents", token)
        names = {item["name"] for item in root["content"]}
        assert "lab00" in names and "solutions" not in names and "labs" not in names, sorted(names)
        with pytest.raises(urllib.error.HTTPError):  # the token is required
            with urllib.request.urlopen(f"{base}/api/contents", timeout=5):
                pass
        assert "settings" in get(f"{base}/lab/api/settings", token)  # JupyterLab itself is loaded
        assert status_of(f"{base}/formgrader", token) == 404          # nbgrader's server extensions are off
        assert status_of(f"{base}/assignments", token) == 404
        cfg = page_config(base, token)
        assert "@jupyter/nbgrader" in cfg["disabledExtensions"]       # and its lab extension
        assert any(e["name"] == "@jupyter-widgets/jupyterlab-manager" for e in cfg["federated_extensions"])
    finally:
        stop(proc)


@pytest.mark.slow
def test_instructor_mode_has_the_formgrader_on_the_course_root(tmp_path):
    proc, base, token = start(tmp_path, "instructor")
    try:
        names = {item["name"] for item in get(f"{base}/api/contents", token)["content"]}
        assert {"solutions", "labs", "nbgrader_config.py"} <= names
        assert status_of(f"{base}/formgrader", token) == 200
        assert "@jupyter/nbgrader" not in page_config(base, token)["disabledExtensions"]
    finally:
        stop(proc)


def test_lab_server_argv_validates_port():
    with pytest.raises(ValueError, match="`port` must be an integer in \\[0, 65535\\], got 70000"):
        lab_server.argv(port=70000)


@pytest.mark.slow
def test_the_terminal_opens_in_the_work_folder_with_the_courses_python(tmp_path):
    """The self-check command the notebooks print for JupyterLab's terminal
    (`python -m autograder check labNN/labNN.ipynb`) needs both."""
    import asyncio
    import sys

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    work = tmp_path / "work"
    lab_server.sync_work(ROOT / "labs", work)
    proc, base, token = start(tmp_path, "learner", root=work)
    try:
        req = urllib.request.Request(f"{base}/api/terminals", data=b"{}", method="POST",
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            name = json.loads(r.read().decode())["name"]

        async def ask() -> str:
            ws = await websocket_connect(HTTPRequest(
                f"{base.replace('http', 'ws')}/terminals/websocket/{name}",
                headers={"Authorization": f"token {token}"}))
            ws.write_message(json.dumps(["stdin", "echo WHERE=$(pwd) PY=$(command -v python)\r"]))
            seen = ""
            end = time.monotonic() + 30
            while "PY=/" not in seen and time.monotonic() < end:
                msg = await asyncio.wait_for(ws.read_message(), timeout=30)
                if msg is None:
                    break
                kind, *rest = json.loads(msg)
                if kind == "stdout":
                    seen += rest[0]
            ws.close()
            return seen

        seen = asyncio.run(ask())
        line = [ln for ln in seen.splitlines() if "WHERE=/" in ln][-1]
        assert f"WHERE={work}" in line, line
        assert f"PY={os.path.dirname(sys.executable)}/python" in line, line
    finally:
        stop(proc)
