"""A class on JupyterHub, end to end, on this machine: the setup `make hub` runs, then a
whole assignment through nbgrader's exchange, as its people do it.

hub/roster.py apply makes an instructor and three students (system users with passwords),
the course folder and the exchange; `jupyterhub -f hub/jupyterhub_config.py` starts with
PAM login, the proxy from hub/node_modules and an idle culler. The instructor generates
and releases lab01 from formgrader, and its Chinese edition as assignment lab01-zh from a
terminal (hub/term.py edition). Ada works in headless Chromium: she logs in, opens
Nbgrader > Assignment List, fetches lab01, types check_logits (one solution cell of
eight) into the notebook, saves and presses Submit (a screenshot per step in
e2e/screenshots/hub/). Bob, in a terminal, fetches, keeps the stub but replaces the
in-kernel checks (which nbgrader's autograde cannot see through) and runs `nbgrader
submit`. Carol takes lab01-zh: she submits the stub, the instructor sets a deadline, she
submits the full solution after it. Ada cannot read Bob's submission in the exchange nor
his home folder. The instructor collects in formgrader (Carol's later submission),
autogrades, grades both assignments with the isolated grader into the gradebook
(hub/term.py grade), checks that the class CSVs and `nbgrader export` agree and that the
export shows Carol late, and releases feedback. The culler stops the idle servers; the hub
is stopped and started again; the students log in, find their work, and fetch feedback
with the isolated grader's scores. The expected scores come from the points in
solutions/lab01/lab01.ipynb: Ada gets those of the graded cells that judge check_logits,
Bob none, Carol all of them.

Needs root (it makes Unix users, and the hub starts servers as them) and chromedriver;
skipped without root. Users and the group are named ltft-test-* and removed afterwards,
and leftovers of an interrupted run are removed before it starts.
"""
from __future__ import annotations

import csv
import grp
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
import requests

from conftest import ROOT, SHOTS, _free_port

HUB = ROOT / "hub"
sys.path.insert(0, str(HUB))
import roster as class_roster  # noqa: E402  (hub/roster.py)

LAB = "lab01"
ZH = f"{LAB}-zh"          # the Chinese edition, released as an assignment of its own
CELL = "check_logits"     # the one solution cell student A fills in the browser
TEACHER, ADA, BOB, CAROL = "ltft-test-teacher", "ltft-test-ada", "ltft-test-bob", "ltft-test-carol"
OUTSIDER = "ltft-test-outsider"
STUDENTS = (ADA, BOB, CAROL)
PEOPLE = (TEACHER, *STUDENTS)
SHOTS_HUB = SHOTS / "hub"        # student A's screenshots, one per step (git-ignored)
# What student A types into check_logits's cell in the browser, in place of the stub's
# `raise NotImplementedError()` (the editor indents the second line like the first).
TYPED = ("if not isinstance(logits, torch.Tensor) or not torch.is_floating_point(logits) or logits.dim() == 0 "
         "or logits.shape[-1] == 0 or torch.isnan(logits).any() or torch.isneginf(logits).all(dim=-1).any(): "
         'raise ValueError(f"`logits` cannot be turned into probabilities, got {logits!r}.")',
         "return None")
GROUP = "ltft-test-instructors"
PLAIN_BEFORE: list[Path] = []    # folders whose ACL the test adds, and removes whole afterwards
CULL_AFTER = 60   # seconds; activity is reported every 5 s in the test (300 s by default)
CHEAT = '''import autograder.kernel
autograder.kernel.check = autograder.kernel.grade = lambda *args, **kwargs: None


def check_logits(logits):
    raise NotImplementedError()
'''

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="the hub test makes Unix users and starts servers as them: run as root")


def wait_until(what, timeout: float, message: str, every: float = 1.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:g} s waiting for {message}")


def remove_user(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    # Processes a previous run left behind (a server, a kernel): each ended by its own id.
    pids = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["userdel", "--remove", name], capture_output=True)


def acl(*args: str) -> None:
    if not shutil.which("setfacl"):
        pytest.fail("the course's Python sits under a folder other users cannot enter, and setfacl is missing: "
                    "run `make e2e` (installs acl) or `apt-get install acl`")
    subprocess.run(["setfacl", *args], check=True, capture_output=True)


def extended_acl(folder) -> bool:
    out = subprocess.run(["getfacl", "--skip-base", "--omit-header", str(folder)], capture_output=True, text=True)
    return bool(out.stdout.strip())


def open_python_to(names) -> None:
    """Let the test users (only them) pass through folders above the course's Python that
    other users cannot enter (a Python under /root, as in some images)."""
    for folder in class_roster.closed_folders(sys.executable):
        if not extended_acl(folder):
            PLAIN_BEFORE.append(folder)
        for name in names:
            acl("-m", f"u:{name}:x", str(folder))


def close_python(names) -> None:
    for folder in class_roster.closed_folders(sys.executable):
        if folder in PLAIN_BEFORE:
            subprocess.run(["setfacl", "--remove-all", str(folder)], capture_output=True)
            continue
        for name in names:
            try:
                pwd.getpwnam(name)
            except KeyError:
                continue
            subprocess.run(["setfacl", "-x", f"u:{name}", str(folder)], capture_output=True)


def remove_test_accounts() -> None:
    close_python(PEOPLE + (OUTSIDER,))
    for name in PEOPLE + (OUTSIDER,):
        remove_user(name)
    try:
        grp.getgrnam(GROUP)
        subprocess.run(["groupdel", GROUP], capture_output=True)
    except KeyError:
        pass


class Class:
    """The machine after `hub/roster.py apply`, and the running hub."""

    def __init__(self, base: Path):
        self.base = base
        self.course = base / "course"
        self.exchange = base / "exchange"
        self.state = base / "state"
        self.roster = base / "roster.csv"
        self.passwords = {name: secrets.token_urlsafe(12) for name in PEOPLE + (OUTSIDER,)}
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.service_token = secrets.token_hex(24)
        self.env = {**os.environ, "LTFT_HUB_ROSTER": str(self.roster), "LTFT_HUB_STATE": str(self.state),
                    "LTFT_HUB_PORT": str(self.port), "LTFT_HUB_CULL_AFTER": str(CULL_AFTER),
                    "LTFT_COURSE_DIR": str(self.course), "LTFT_EXCHANGE": str(self.exchange),
                    "LTFT_INSTRUCTORS_GROUP": GROUP}
        self.proc = None
        self.config = base / "jupyterhub_test_config.py"
        self.logfile = base / "jupyterhub.log"

    def start(self) -> None:
        """`jupyterhub -f` on the test's config; returns once /hub/health answers."""
        self.log = self.logfile.open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(self.config)],
                                     cwd=self.base, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

        def healthy():
            if self.proc.poll() is not None:
                pytest.fail(f"the hub exited:\n{self.logfile.read_text()[-4000:]}")
            try:
                return requests.get(f"{self.url}/hub/health", timeout=5).status_code == 200
            except requests.RequestException:
                return False
        wait_until(healthy, 120, "the hub to answer")

    def stop(self) -> None:
        """SIGTERM, as systemd stops it: cleanup_servers stops every server first."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        self.log.close()

    def api(self, path: str) -> dict:
        r = requests.get(f"{self.url}/hub/api/{path}", headers={"Authorization": f"token {self.service_token}"},
                         timeout=30)
        r.raise_for_status()
        return r.json()

    def stop_server(self, name: str) -> None:
        """Stop `name`'s server through the hub's API (the Hub Control Panel's Stop My Server)."""
        r = requests.delete(f"{self.url}/hub/api/users/{name}/server",
                            headers={"Authorization": f"token {self.service_token}"}, timeout=60)
        assert r.status_code in (202, 204), (r.status_code, r.text[:300])

    def as_user(self, name: str, *cmd: str, timeout: float = 300, student: bool = False,
                check: bool = True) -> subprocess.CompletedProcess:
        """`cmd` as `name`, the way their terminal runs it: an instructor's in the course
        folder, a student's in their home folder."""
        home = pwd.getpwnam(name).pw_dir
        config = [HUB / "jupyter" / "student", HUB / "jupyter" / "common"] if student else \
            [self.course, HUB / "jupyter" / "common"]
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": home,
               "LTFT_EXCHANGE": str(self.exchange), "JUPYTER_CONFIG_PATH": ":".join(map(str, config)),
               "LANG": "C.UTF-8"}
        runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
        proc = subprocess.run([runuser, "-u", name, "--", *cmd], cwd=home if student else self.course, env=env,
                              capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, \
                f"{' '.join(cmd)} as {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    def can_read(self, name: str, path: Path) -> bool:
        """Whether `name` can open `path` (a file) or list it (a folder)."""
        probe = "import os, sys; p = sys.argv[1]; os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)"
        return self.as_user(name, sys.executable, "-c", probe, str(path), student=True, check=False).returncode == 0


class Person:
    """One browser: a requests session that logs in to the hub and talks to the server."""

    def __init__(self, hub: Class, name: str):
        self.hub, self.name = hub, name
        self.s = requests.Session()
        self.server = f"{hub.url}/user/{name}"

    def login(self, password: str) -> bool:
        self.s.get(f"{self.hub.url}/hub/login", timeout=30)
        r = self.s.post(f"{self.hub.url}/hub/login", allow_redirects=False, timeout=60,
                        data={"username": self.name, "password": password,
                              "_xsrf": self.s.cookies.get("_xsrf", path="/hub/")})
        return r.status_code == 302

    def start(self) -> None:
        """Open /user/NAME/lab as a browser would: the hub spawns the server, then the
        OAuth hand-off gives this session the server's cookie."""
        self.s.get(f"{self.hub.url}/hub/spawn/{self.name}", timeout=60)

        def lab_open():
            r = self.s.get(f"{self.server}/lab", timeout=60)
            if r.status_code == 500 and "/hub/spawn-pending/" in r.url:
                pytest.fail(f"{self.name}'s server failed to start: {re.sub(r'<[^>]+>', ' ', r.text)[-1500:]}")
            return r.status_code == 200 and r.url.startswith(f"{self.server}/lab") and "jupyter-config-data" in r.text
        wait_until(lab_open, 150, f"{self.name}'s JupyterLab", every=2)

    def xsrf(self) -> dict:
        token = next(c.value for c in self.s.cookies if c.name == "_xsrf" and c.path.startswith(f"/user/{self.name}"))
        return {"X-XSRFToken": token}

    def get(self, path: str, **kw) -> requests.Response:
        return self.s.get(f"{self.server}/{path}", timeout=kw.pop("timeout", 120), **kw)

    def post(self, path: str, timeout: float = 300, **kw) -> requests.Response:
        r = self.s.post(f"{self.server}/{path}", headers=self.xsrf(), timeout=timeout, **kw)
        assert r.status_code < 400 and not r.text.lstrip().startswith("<"), \
            f"POST {path} as {self.name}: {r.status_code} {re.sub(r'<[^>]+>', ' ', r.text)[-2000:]}"
        body = r.json() if r.headers.get("Content-Type", "").startswith("application/json") or r.text.startswith("{") else {}
        assert not isinstance(body, dict) or body.get("success", True), \
            f"POST {path} as {self.name}: {body.get('error') or body.get('value') or body}"[-3000:]
        return r

    def assignments(self, action: str | None = None, lab: str = LAB) -> list[dict]:
        course = {"course_id": class_roster.COURSE_ID, "assignment_id": lab}
        if action:
            r = self.post(f"assignments/{action}", data=course)
        else:
            r = self.get("assignments", params={"course_id": class_roster.COURSE_ID})
        body = r.json()
        assert body.get("success"), f"assignments {action or 'list'} as {self.name}: {body}"
        return body["value"]

    def notebook(self, path: str) -> nbformat.NotebookNode:
        r = self.get(f"api/contents/{path}", params={"content": 1})
        assert r.status_code == 200, f"{path} as {self.name}: {r.status_code}"
        return nbformat.from_dict(r.json()["content"])

    def save(self, path: str, nb) -> None:
        r = self.s.put(f"{self.server}/api/contents/{path}", headers=self.xsrf(), timeout=60,
                       json={"type": "notebook", "format": "json", "content": nb})
        assert r.status_code in (200, 201), f"saving {path} as {self.name}: {r.status_code} {r.text[-500:]}"


@pytest.fixture(scope="module")
def hub_class():
    remove_test_accounts()
    base = Path(tempfile.mkdtemp(prefix="ltft-hub-test-"))
    base.chmod(0o755)                     # the test users walk through it to their homes
    (base / "homes").mkdir(mode=0o755)
    h = Class(base)
    with h.roster.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email", "role"])
        w.writerow([TEACHER, "Tess", "Teacher", "tess@example.edu", "instructor"])
        w.writerow([ADA, "Ada", "Lovelace", "ada@example.edu", "student"])
        w.writerow([BOB, "Bob", "Shortcut", "bob@example.edu", "student"])
        w.writerow([CAROL, "Carol", "Chen", "carol@example.edu", "student"])
    try:
        apply = subprocess.run([sys.executable, str(HUB / "roster.py"), "apply", str(h.roster),
                                "--home-base", str(base / "homes")], env=h.env, capture_output=True, text=True,
                               timeout=600)
        assert apply.returncode == 0, apply.stdout + apply.stderr
        again = subprocess.run(apply.args, env=h.env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and "nothing to do" in again.stdout, \
            f"a second apply should change nothing:\n{again.stdout}{again.stderr}"
        subprocess.run(["useradd", "--create-home", "--base-dir", str(base / "homes"), OUTSIDER], check=True)
        open_python_to(PEOPLE)
        subprocess.run(["chpasswd"], input="".join(f"{n}:{p}\n" for n, p in h.passwords.items()), text=True,
                       check=True)
        # The test watches the hub through a service token, as an admin dashboard would.
        h.config.write_text(
            "c = get_config()\n"
            f"load_subconfig({str(HUB / 'jupyterhub_config.py')!r})\n"
            f"c.JupyterHub.hub_port = {_free_port()}\n"
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{_free_port()}'\n"
            "c.JupyterHub.last_activity_interval = 5\n"
            "c.Spawner.environment = {'JUPYTERHUB_ACTIVITY_INTERVAL': '5'}\n"
            f"c.JupyterHub.services.append({{'name': 'ltft-test', 'api_token': {h.service_token!r}}})\n"
            "c.JupyterHub.load_roles.append({'name': 'ltft-test', 'scopes': ['list:users', 'read:users', 'servers'],"
            " 'services': ['ltft-test']})\n")
        h.start()
        yield h
    finally:
        if h.proc is not None:
            h.stop()
            print(f"--- the hub's log (last lines)\n{h.logfile.read_text()[-6000:]}")
        remove_test_accounts()
        shutil.rmtree(base, ignore_errors=True)


def source_cells() -> list:
    """The cells of the lab's nbgrader source notebook, solutions and hidden tests in."""
    return nbformat.read(str(ROOT / "solutions" / LAB / f"{LAB}.ipynb"), as_version=4).cells


def solutions() -> dict[str, str]:
    """grade id -> the full solution, for every solution cell of the lab."""
    return {c.metadata.nbgrader.grade_id: c.source for c in source_cells()
            if c.metadata.get("nbgrader", {}).get("solution")}


def points(after: str | None = None) -> float:
    """The lab's points, as its source notebook gives them; with `after`, only those of the
    graded cells between that solution cell and the next one (the cells that judge it)."""
    total, counting = 0.0, after is None
    for c in source_cells():
        meta = c.metadata.get("nbgrader", {})
        if after is not None and meta.get("solution"):
            counting = meta["grade_id"] == after
        if counting and meta.get("grade"):
            total += float(meta["points"])
    return total


def with_answer(nb, source: str, cell: str = CELL):
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == cell:
            c.source = source
            return nb
    pytest.fail(f"the released {LAB} has no {cell} cell")


def with_answers(nb, sources: dict[str, str]):
    for cell, source in sources.items():
        with_answer(nb, source, cell)
    return nb


def answer_in(nb, cell: str = CELL) -> str:
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == cell)


def answers_in(nb) -> dict[str, str]:
    return {cell: answer_in(nb, cell) for cell in solutions()}


def feedback_score(person: Person, lab: str = LAB) -> str:
    listing = person.get(f"api/contents/{lab}/feedback").json()
    [stamp] = [item["path"] for item in listing["content"] if item["type"] == "directory"]
    r = person.get(f"api/contents/{stamp}/{LAB}.html", params={"content": 1, "type": "file", "format": "text"})
    html = r.json()["content"]
    m = re.search(rf"{LAB} \(Score: ([0-9.]+) / ([0-9.]+)\)", html)
    assert m, f"no score in {person.name}'s feedback"
    return f"{float(m.group(1)):g}/{float(m.group(2)):g}"


# --- student A in headless Chromium ----------------------------------------------------

def browser_wait(driver, what, timeout: float, message: str, shot: str):
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got = what(driver)
            if got:
                return got
        except (StaleElementReferenceException, WebDriverException):
            pass
        time.sleep(0.5)
    driver.save_screenshot(str(SHOTS_HUB / f"timeout_{shot}.png"))
    pytest.fail(f"timed out after {timeout:g} s waiting for {message} (screenshot timeout_{shot}.png)")


def assignment_row(driver, listing: str, lab: str):
    """The row of `lab` in the Assignments tab's `listing` (released, fetched, submitted)."""
    from selenium.webdriver.common.by import By
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{listing}_assignments_list .list_item"):
        if lab in row.text.split():
            return row
    return None


def button(row, label: str):
    from selenium.webdriver.common.by import By
    return next((b for b in row.find_elements(By.CSS_SELECTOR, "button") if b.text.strip() == label), None)


def open_assignments_tab(driver):
    from selenium.webdriver.common.by import By
    for item in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"):
        if item.text.strip() == "Nbgrader":
            item.click()
            break
    else:
        pytest.fail("student A's JupyterLab has no Nbgrader menu")

    def entry(d):
        return next((li for li in d.find_elements(By.CSS_SELECTOR, ".lm-Menu-item")
                     if li.text.split("\n")[0].strip() == "Assignment List"), None)
    browser_wait(driver, entry, 20, "the Assignment List menu item", "menu").click()


def browser_student(h: Class, driver, name: str, password: str) -> None:
    """Log in, see the lab in the Assignments tab, fetch it, write check_logits in the
    notebook editor, save, submit with the tab's Submit button; a screenshot per step."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    SHOTS_HUB.mkdir(parents=True, exist_ok=True)
    step = iter(range(1, 100))

    def shot(what: str) -> None:
        driver.save_screenshot(str(SHOTS_HUB / f"{next(step):02d}_{what}.png"))

    driver.get(f"{h.url}/hub/login")
    browser_wait(driver, lambda d: d.find_element(By.ID, "username_input"), 60, "the login page", "login")
    driver.find_element(By.ID, "username_input").send_keys(name)
    driver.find_element(By.ID, "password_input").send_keys(password)
    shot("login")
    driver.find_element(By.ID, "login_submit").click()
    browser_wait(driver, lambda d: d.current_url.startswith(f"{h.url}/user/{name}/lab")
                 and d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"), 180, "student A's JupyterLab", "lab")
    time.sleep(2)
    for b in driver.find_elements(By.CSS_SELECTOR, ".jp-toast-button, .Toastify button"):
        if b.text.strip() == "No":          # the "official Jupyter news?" question
            b.click()
    shot("jupyterlab")

    open_assignments_tab(driver)
    row = browser_wait(driver, lambda d: assignment_row(d, "released", LAB), 90,
                       f"{LAB} among the released assignments", "released")
    shot("assignments_tab_released")
    button(row, "Fetch").click()
    browser_wait(driver, lambda d: assignment_row(d, "fetched", LAB), 90, f"{LAB} among the fetched", "fetched")
    shot("assignments_tab_fetched")

    driver.get(f"{h.url}/user/{name}/lab/tree/{LAB}/{LAB}.ipynb")
    browser_wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")) > 3, 120,
                 "the notebook to open", "notebook")
    time.sleep(2)

    def stub_cell(d):
        return next((c for c in d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")
                     if f"def {CELL}(" in c.text and "NotImplementedError" in c.text), None)
    cell = browser_wait(driver, stub_cell, 60, f"the {CELL} cell", "cell")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
    lines = [line for line in cell.find_elements(By.CSS_SELECTOR, ".cm-line") if "NotImplementedError" in line.text]
    assert lines, "the stub's `raise NotImplementedError()` line is not in the editor"
    lines[-1].click()
    # End, then Shift+Home: the line's text without its indentation; the editor keeps the
    # indentation for the next line.
    ActionChains(driver).send_keys(Keys.END).key_down(Keys.SHIFT).send_keys(Keys.HOME).key_up(Keys.SHIFT).perform()
    ActionChains(driver).send_keys(TYPED[0]).send_keys(Keys.ENTER).send_keys(TYPED[1]).perform()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
    home = Path(pwd.getpwnam(name).pw_dir)
    saved = home / LAB / f"{LAB}.ipynb"

    def typed_and_saved(d):
        return all(line in answer_in(nbformat.read(str(saved), as_version=4)) for line in TYPED)
    browser_wait(driver, typed_and_saved, 60, "the notebook to be saved", "saved")
    # The long first line scrolled the editor sideways; back to the start of the lines.
    driver.execute_script("arguments[0].querySelector('.cm-scroller').scrollLeft = 0;", cell)
    shot("solution_written_and_saved")

    driver.get(f"{h.url}/user/{name}/lab")
    browser_wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"), 120, "JupyterLab", "lab2")
    time.sleep(2)
    if not assignment_row(driver, "fetched", LAB):        # the tab is restored with the layout, or opened again
        open_assignments_tab(driver)
    row = browser_wait(driver, lambda d: assignment_row(d, "fetched", LAB), 90, f"{LAB} among the fetched",
                       "fetched2")
    button(row, "Submit").click()
    browser_wait(driver, lambda d: assignment_row(d, "submitted", LAB), 120, f"{LAB} among the submitted",
                 "submitted")
    time.sleep(1)
    shot("assignments_tab_submitted")
    driver.get("about:blank")     # A closes the tab: an open JupyterLab keeps the server from being culled


def latest_export(h: Class) -> dict[tuple[str, str], dict]:
    h.as_user(TEACHER, "nbgrader", "export", "--to", "export.csv")
    with (h.course / "export.csv").open(newline="") as fh:
        return {(r["assignment"], r["student_id"]): r for r in csv.DictReader(fh)}


def class_csv(h: Class, assignment: str) -> dict[str, float]:
    with (h.course / "grades" / assignment / "grades.csv").open(newline="") as fh:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh)}


def gradebook_scores(h: Class) -> dict[tuple[str, str], tuple[float, float]]:
    """(assignment, student) -> (score, seconds late), read as root from the course's gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(class_roster.Place(h.course, h.exchange, GROUP).db_url) as gb:
        return {(a.name, s.student.id): (float(s.score), float(s.total_seconds_late))
                for a in gb.assignments for s in gb.assignment_submissions(a.name)}


@needs_root
def test_a_class_on_the_hub(hub_class, browser):
    h = hub_class
    teacher, ada, bob, carol = (Person(h, n) for n in (TEACHER, ADA, BOB, CAROL))
    # What the isolated grader must give, from the lab's source notebook: A filled one cell and
    # gets the points of the graded cells that judge it; C's full solution gets them all.
    full, ada_points = points(), points(after=CELL)
    assert 0 < ada_points < full, (ada_points, full)

    # Login: the roster decides who gets in; PAM checks the password.
    assert not Person(h, ADA).login("not-the-password"), "a wrong password must not log in"
    assert not Person(h, OUTSIDER).login(h.passwords[OUTSIDER]), "a system user not on the roster must not log in"
    for p in (teacher, bob, carol):
        assert p.login(h.passwords[p.name]), f"{p.name} could not log in with their password"
    assert h.api(f"users/{TEACHER}")["admin"] and not h.api(f"users/{ADA}")["admin"]
    for name in STUDENTS:
        assert os.stat(pwd.getpwnam(name).pw_dir).st_mode & 0o077 == 0, f"{name}'s home must be private"
    assert h.course.stat().st_mode & 0o7777 == 0o2770 and h.exchange.stat().st_mode & 0o7777 == 0o1777

    # The instructor generates and releases lab01 from formgrader, in the course folder, and
    # the Chinese edition, lab01-zh, from a terminal (an assignment of its own).
    teacher.start()
    assert teacher.get("formgrader").status_code == 200
    teacher.post(f"formgrader/api/assignment/{LAB}/assign")
    teacher.post(f"formgrader/api/assignment/{LAB}/release")
    h.as_user(TEACHER, sys.executable, str(HUB / "term.py"), "edition", LAB, "zh")
    h.as_user(TEACHER, "nbgrader", "release_assignment", ZH)
    outbound = h.exchange / class_roster.COURSE_ID / "outbound"
    assert (outbound / LAB / f"{LAB}.ipynb").is_file() and (outbound / ZH / f"{LAB}.ipynb").is_file()
    zh_release = nbformat.read(str(outbound / ZH / f"{LAB}.ipynb"), as_version=4)
    assert zh_release.metadata.get("language") == "zh" and "贪心" in "".join(c.source for c in zh_release.cells)
    gid = grp.getgrnam(GROUP).gr_gid
    for folder in ("outbound", "inbound"):          # every instructor can collect, not only who released
        st = (h.exchange / class_roster.COURSE_ID / folder).stat()
        assert st.st_gid == gid and st.st_mode & 0o020, f"exchange {folder} is not the instructors' to write"

    # Student A, in headless Chromium: log in, Assignments tab, fetch, write, save, submit.
    browser_student(h, browser, ADA, h.passwords[ADA])
    assert ada.login(h.passwords[ADA])
    ada.start()
    assert "submitted" in [a["status"] for a in ada.assignments() if a["assignment_id"] == LAB]
    for session in ada.get("api/sessions").json():     # her notebook's kernel, which would keep the server active
        r = ada.s.delete(f"{ada.server}/api/sessions/{session['id']}", headers=ada.xsrf(), timeout=60)
        assert r.status_code == 204, f"closing {session['path']}: {r.status_code}"

    # Students have no instructor tools.
    bob.start()
    assert bob.get("formgrader").status_code == 404, "students must not reach formgrader"
    page = bob.get("lab").text
    assert "@jupyter/nbgrader:formgrader" in page and "@jupyter/nbgrader:create-assignment" in page, \
        "the student's JupyterLab must list the instructor plugins as disabled"

    # Student B, in a terminal: fetch, replace the in-kernel checks (nbgrader's autograde cannot
    # see through that), `nbgrader submit`.
    h.as_user(BOB, "nbgrader", "fetch_assignment", LAB, student=True)
    bob_nb = Path(pwd.getpwnam(BOB).pw_dir) / LAB / f"{LAB}.ipynb"
    nbformat.write(with_answer(nbformat.read(str(bob_nb), as_version=4), CHEAT), str(bob_nb))
    h.as_user(BOB, "nbgrader", "submit", LAB, student=True)

    # Student C takes the Chinese edition: submits the stub in time, then the full solution
    # (every solution cell) after the deadline the instructor set in between; the later one
    # counts and is late.
    carol.start()
    listed = {a["assignment_id"]: a["status"] for a in carol.assignments()}
    assert listed.get(ZH) == "released" and listed.get(LAB) == "released", listed
    carol.assignments("fetch", lab=ZH)
    carol.assignments("submit", lab=ZH)
    due = datetime.now(timezone.utc)
    h.as_user(TEACHER, "nbgrader", "db", "assignment", "add", ZH,
              f"--duedate={due.strftime('%Y-%m-%d %H:%M:%S.%f')} UTC")
    time.sleep(1.5)
    carol.start()                         # again, if the culler stopped it meanwhile
    path = f"{ZH}/{LAB}.ipynb"
    carol.save(path, with_answers(carol.notebook(path), solutions()))
    carol.assignments("submit", lab=ZH)

    # Nobody reads another student's work: not in the exchange, not in their home.
    inbound = h.exchange / class_roster.COURSE_ID / "inbound"
    [bob_sub] = [p for p in inbound.iterdir() if p.name.startswith(f"{BOB}+{LAB}+")]
    for path in (inbound, bob_sub, bob_sub / f"{LAB}.ipynb", bob_nb, Path(pwd.getpwnam(BOB).pw_dir)):
        assert not h.can_read(ADA, path), f"{ADA} can read {path}"
    assert h.can_read(BOB, bob_sub / f"{LAB}.ipynb") and h.can_read(TEACHER, bob_sub / f"{LAB}.ipynb")
    for sub in inbound.iterdir():      # the Assignments tab's Submit closes them too, not only the command
        assert sub.stat().st_mode & 0o007 == 0 and sub.stat().st_gid == gid, f"{sub.name} is open to others"

    # The instructor collects in formgrader and autogrades: nbgrader's in-kernel scores.
    teacher.start()                       # again, if the culler stopped it meanwhile
    teacher.post(f"formgrader/api/assignment/{LAB}/collect")
    teacher.post(f"formgrader/api/assignment/{ZH}/collect")
    collected = h.course / "submitted" / CAROL / ZH / f"{LAB}.ipynb"
    assert answers_in(nbformat.read(str(collected), as_version=4)) == solutions(), \
        "collect must take C's later submission"
    # Autograding runs every notebook: in a terminal, since formgrader's request would hold
    # the server busy for longer than the test's short culler allows.
    h.as_user(TEACHER, "nbgrader", "autograde", LAB, timeout=600)
    h.as_user(TEACHER, "nbgrader", "autograde", ZH, timeout=600)
    in_kernel = gradebook_scores(h)
    print(f"nbgrader autograde (in-kernel) scores: {in_kernel}")
    assert in_kernel[(LAB, ADA)][0] == ada_points, in_kernel
    assert in_kernel[(LAB, BOB)][0] == full, f"B's no-op checks pass every cell in the kernel: {in_kernel}"

    # In a terminal: the isolated grader, its scores into the gradebook, both editions.
    graded = h.as_user(TEACHER, sys.executable, str(HUB / "term.py"), "grade", LAB, ZH, timeout=600)
    isolated = gradebook_scores(h)
    scores = {key: score for key, (score, _) in isolated.items()}
    assert scores == {(LAB, ADA): ada_points, (LAB, BOB): 0.0, (ZH, CAROL): full}, (
        f"after the isolated grade the gradebook holds {isolated} (nbgrader's own: {in_kernel})\n{graded.stdout}")
    assert isolated[(ZH, CAROL)][1] > 0, "C's second submission came after the deadline: late"
    assert isolated[(LAB, ADA)][1] == isolated[(LAB, BOB)][1] == 0

    # The class CSVs and `nbgrader export` agree, and the export flags the late one.
    export = latest_export(h)
    for assignment in (LAB, ZH):
        for student, score in class_csv(h, assignment).items():
            row = export[(assignment, student)]
            assert float(row["score"]) == score, f"{assignment} {student}: class CSV {score}, export {row}"
    late = export[(ZH, CAROL)]
    assert datetime.fromisoformat(late["timestamp"]) > datetime.fromisoformat(late["duedate"]), late
    for student in (ADA, BOB):
        assert export[(LAB, student)]["duedate"] in ("", "None"), export[(LAB, student)]

    for assignment in (LAB, ZH):
        h.as_user(TEACHER, "nbgrader", "generate_feedback", assignment)
    teacher.start()
    for assignment in (LAB, ZH):
        teacher.post(f"formgrader/api/assignment/{assignment}/release_feedback")

    # The culler stops servers nobody uses. A's server, which a browser used, keeps reporting
    # activity after her tab is closed, so she stops it herself (Hub Control Panel); B's and C's
    # are left to the culler.
    h.stop_server(ADA)
    wait_until(lambda: not any(h.api(f"users/{n}")["servers"] for n in STUDENTS),
               CULL_AFTER * 6, "the idle culler to stop the students' servers", every=2)

    # The hub stops and starts again: users, submissions, gradebook, homes all still there.
    before = gradebook_scores(h)
    h.stop()
    h.start()
    assert {u["name"] for u in h.api("users")} >= set(PEOPLE)
    assert gradebook_scores(h) == before
    assert sorted(p.name.split("+")[0] for p in inbound.iterdir()) == sorted([ADA, BOB, CAROL, CAROL])

    for student, lab, score in ((ada, LAB, ada_points), (bob, LAB, 0.0), (carol, ZH, full)):
        student.s.cookies.clear()
        assert student.login(h.passwords[student.name]), f"{student.name} cannot log in after the restart"
        student.start()
        kept = answers_in(student.notebook(f"{lab}/{LAB}.ipynb"))
        assert {ADA: all(line in kept[CELL] for line in TYPED), BOB: kept[CELL] == CHEAT,
                CAROL: kept == solutions()}[student.name], f"{student.name}'s work was lost"
        student.assignments("fetch_feedback", lab=lab)
        assert feedback_score(student, lab) == f"{score:g}/{full:g}", f"{student.name}'s feedback"


# --- the pieces, without root ----------------------------------------------------------

def write(tmp_path, text: str) -> Path:
    p = tmp_path / "roster.csv"
    p.write_text(text)
    return p


def test_example_roster_reads_and_logs_in_by_id_or_email():
    r = class_roster.read_roster(HUB / "roster.example.csv")
    assert r.instructors == ["khan"] and "ada" in r.students
    assert r.role("ada") == "student" and r.role("nobody") is None
    assert r.login("ada") == "ada" and r.login("Ada@Example.edu") == "ada"   # LTI sends the email claim
    assert r.login("someone@example.edu") is None and r.login("") is None


@pytest.mark.parametrize("text, message", [
    ("id,role\nAda,student\nt,instructor\n", "`id` must be a Unix user name"),
    ("id,role\nada,ta\nt,instructor\n", "`role` must be one of student, instructor, got 'ta'."),
    ("id,role\nada,student\nada,student\nt,instructor\n", "`id` must be unique, got 'ada' twice."),
    ("id,email,role\nada,a@x.org,student\nbob,A@x.org,student\nt,,instructor\n", "`email` must be unique"),
    ("id,name\nada,Ada\n", "the header must name `role`"),
    ("id,role\nada,student\n", "at least one instructor"),
])
def test_roster_errors_name_the_line_and_the_value(tmp_path, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        class_roster.read_roster(write(tmp_path, text))


def test_course_config_matches_the_repository_config(tmp_path):
    """The hub's course folder grades exactly as the repository's nbgrader_config.py does:
    same course id, stubs, timeouts and ignore list; only where things live differs."""
    from traitlets.config.loader import PyFileConfigLoader
    place = class_roster.Place(tmp_path / "course", tmp_path / "exchange", GROUP)
    (tmp_path / "nbgrader_config.py").write_text(class_roster.course_config(place))
    hub_cfg = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    repo_cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    for section, key in [("CourseDirectory", "course_id"), ("CourseDirectory", "ignore"),
                         ("ClearSolutions", "code_stub"), ("ClearSolutions", "text_stub"),
                         ("Execute", "timeout"), ("Execute", "interrupt_on_timeout")]:
        assert hub_cfg[section][key] == repo_cfg[section][key], f"{section}.{key}"
    assert hub_cfg.CourseDirectory.source_directory == str(ROOT / "solutions")
    assert hub_cfg.CourseDirectory.root == str(place.course_dir)
    assert hub_cfg.Exchange.root == str(place.exchange)


def test_student_servers_turn_off_only_nbgrader_pieces_that_exist():
    """The names in hub/jupyter/student are nbgrader's own (a renamed plugin would silently
    leave formgrader on for students)."""
    import nbgrader
    from course import lab_server
    server = json.loads((HUB / "jupyter" / "student" / "jupyter_server_config.json").read_text())
    off = server["ServerApp"]["jpserver_extensions"]
    assert set(off) <= set(lab_server.NBGRADER_SERVER_EXTENSIONS) and not any(off.values())
    assert "nbgrader.server_extensions.assignment_list" not in off, "students need the Assignments tab"
    page = json.loads((HUB / "jupyter" / "student" / "labconfig" / "page_config.json").read_text())
    bundle = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    shipped = "".join(p.read_text(errors="ignore") for p in bundle.glob("*.js"))
    for plugin in page["disabledExtensions"]:
        assert f'"{plugin}"' in shipped or f"'{plugin}'" in shipped, f"{plugin} is not a plugin of {nbgrader.__version__}"
    assert "@jupyter/nbgrader:assignment-list" not in page["disabledExtensions"]


def test_lti_login_maps_the_lms_email_to_the_roster_id():
    import asyncio
    roster = class_roster.read_roster(HUB / "roster.example.csv")
    auth = class_roster.lti13_authenticator(roster)()
    login = lambda claims: asyncio.run(auth.authenticate(None, claims))  # noqa: E731
    assert login({"email": "Grace@Example.edu"})["name"] == "grace"
    assert login({"email": "stranger@example.edu"}) is None


def test_helm_values_parse_and_their_python_compiles():
    import yaml
    values = yaml.safe_load((HUB / "helm" / "values.yaml").read_text())
    compile(values["hub"]["extraConfig"]["ltft"], "values.yaml:hub.extraConfig.ltft", "exec")
    assert values["cull"]["enabled"] and set(values["hub"]["extraFiles"]) == {"roster", "rosterModule"}
    assert "roster.py" in values["hub"]["extraFiles"]["rosterModule"]["mountPath"]


def test_term_names_an_edition_by_its_lab_and_language():
    import term
    assert term.lab_of("lab01") == ("lab01", None) and term.lab_of("lab01-zh") == ("lab01", "zh")
    for bad in ("lab1", "lab01_zh", "lab01-", "LAB01", "lab01-zh-x"):
        with pytest.raises(ValueError, match="`assignment` must be labNN or labNN-LANG"):
            term.lab_of(bad)
