"""The end-to-end tier, run by `make e2e` (and CI); `make test` never collects this folder.

- test_nbgrader_pipeline.py: the real nbgrader CLI over every lab in every language edition
  (each solution and release notebook runs top to bottom), and the standalone grader agreeing
  with it cell by cell.
- test_lab_in_browser.py: a real JupyterLab, started the way `make lab` starts it, driven by
  headless Chromium through Selenium and Debian's chromium-driver (`make e2e` installs
  chromium, chromium-driver and a CJK font with apt-get when run as root). Screenshots go to
  e2e/screenshots/ (git-ignored).
- test_adversarial_user.py: the grader run by an ordinary user, over the attacks and as the
  whole adversarial suite; test_preflight_gradebook.py: a corpus graded on both paths with
  nbgrader's gradebook carrying the isolated scores."""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "e2e" / "screenshots"
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.e2e)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab in learner mode on a scratch work folder."""

    def __init__(self, work: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.work, self.port, self.token, self.proc, self.log = work, port, token, proc, log

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{path}?token={self.token}"


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """`python -m course.lab_server`, the command `make lab` runs, on a scratch work folder
    (the learner's own work/ is never touched by the tests)."""
    tmp = tmp_path_factory.mktemp("e2e")
    work = tmp / "work"
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp / "jupyterlab.log"
    env = {**os.environ, "HOME": str(tmp / "home"), "JUPYTER_RUNTIME_DIR": str(tmp / "rt")}
    env.pop("MPLBACKEND", None)   # the notebook's own inline backend draws the figures
    cmd = [sys.executable, "-m", "course.lab_server", "--no-browser", "--port", str(port), "--token", token,
           "--work", str(work)]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(240):
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                         headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(req, timeout=2).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"the lab server exited early:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"the lab server did not answer within 120 s:\n{log.read_text()[-3000:]}")
    yield Lab(work, port, token, proc, log)
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def browser():
    if not Path(CHROMEDRIVER).is_file():
        pytest.fail(f"no chromedriver at {CHROMEDRIVER}: run `make e2e` (installs chromium and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    profile = tempfile.mkdtemp(prefix="e2e-chromium-")
    opts = webdriver.ChromeOptions()
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary:
        opts.binary_location = binary
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(120)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
