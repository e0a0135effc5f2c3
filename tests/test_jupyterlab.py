"""The server `make lab` starts really starts, serves labs/ and stops."""
import json
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


@pytest.mark.slow
def test_jupyterlab_starts_on_labs_and_stops(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    cmd = lab_server.argv(port=port, ip="127.0.0.1", token=token, browser=False)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        status = None
        for _ in range(120):
            try:
                status = get(f"{base}/api/status", token)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited early:\n{proc.stdout.read().decode()[-3000:]}")
                time.sleep(0.5)
        assert status is not None, "jupyter lab did not answer /api/status within 60 s"
        assert "started" in status
        root = get(f"{base}/api/contents", token)
        names = {item["name"] for item in root["content"]}
        assert "lab00" in names and "solutions" not in names, f"root is not labs/: {sorted(names)}"
        with pytest.raises(urllib.error.HTTPError):  # the token is required
            with urllib.request.urlopen(f"{base}/api/contents", timeout=5):
                pass
        lab = get(f"{base}/lab/api/settings", token)
        assert "settings" in lab  # the JupyterLab extension is loaded, not just a bare server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode is not None


def test_lab_server_argv_validates_port():
    with pytest.raises(ValueError, match="`port` must be an integer in \\[0, 65535\\], got 70000"):
        lab_server.argv(port=70000)
