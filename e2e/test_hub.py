"""A class on JupyterHub, end to end, on this machine: the setup `make hub` runs, then a
whole assignment through nbgrader's exchange, as its people do it over HTTP.

hub/roster.py apply makes an instructor and two students (system users with passwords),
the course folder and the exchange; `jupyterhub -f hub/jupyterhub_config.py` starts with
PAM login, the proxy from hub/node_modules and an idle culler. The instructor generates
and releases lab00 from formgrader. Each student logs in with their password, fetches
lab00 from the Assignments API, edits it and submits: Ada solves it; Bob leaves the stub
and replaces the in-kernel checks, which nbgrader's autograde cannot see through. The
instructor collects in formgrader, then, in a terminal, autogrades, grades with the
isolated grader, runs gradebook-sync and generates feedback, and releases it from
formgrader. The culler
stops the idle servers; the students log in again, find their work where they left it,
and fetch feedback that shows the isolated grader's scores (Ada 6/6, Bob 0/6).

Needs root (it makes Unix users, and the hub starts servers as them); skipped otherwise.
Users and the group are named ltft-test-* and removed afterwards, and leftovers of an
interrupted run are removed before it starts.
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
from pathlib import Path

import nbformat
import pytest
import requests

from conftest import ROOT, _free_port

HUB = ROOT / "hub"
sys.path.insert(0, str(HUB))
import roster as class_roster  # noqa: E402  (hub/roster.py)

LAB = "lab00"
POINTS = 6.0
TEACHER, ADA, BOB, OUTSIDER = "ltft-test-teacher", "ltft-test-ada", "ltft-test-bob", "ltft-test-outsider"
GROUP = "ltft-test-instructors"
PLAIN_BEFORE: list[Path] = []    # folders whose ACL the test adds, and removes whole afterwards
CULL_AFTER = 60   # seconds; activity is reported every 5 s in the test (300 s by default)
CHEAT = '''import autograder.kernel
autograder.kernel.check = autograder.kernel.grade = lambda *args, **kwargs: None


def greedy_token(logits):
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
    close_python((TEACHER, ADA, BOB, OUTSIDER))
    for name in (TEACHER, ADA, BOB, OUTSIDER):
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
        self.passwords = {name: secrets.token_urlsafe(12) for name in (TEACHER, ADA, BOB, OUTSIDER)}
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.service_token = secrets.token_hex(24)
        self.env = {**os.environ, "LTFT_HUB_ROSTER": str(self.roster), "LTFT_HUB_STATE": str(self.state),
                    "LTFT_HUB_PORT": str(self.port), "LTFT_HUB_CULL_AFTER": str(CULL_AFTER),
                    "LTFT_COURSE_DIR": str(self.course), "LTFT_EXCHANGE": str(self.exchange),
                    "LTFT_INSTRUCTORS_GROUP": GROUP}
        self.proc = None

    def api(self, path: str) -> dict:
        r = requests.get(f"{self.url}/hub/api/{path}", headers={"Authorization": f"token {self.service_token}"},
                         timeout=30)
        r.raise_for_status()
        return r.json()

    def as_user(self, name: str, *cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`cmd` in the course folder as `name`, the way an instructor's terminal runs it."""
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": pwd.getpwnam(name).pw_dir,
               "LTFT_EXCHANGE": str(self.exchange), "JUPYTER_CONFIG_PATH": f"{self.course}:{HUB / 'jupyter' / 'common'}",
               "LANG": "C.UTF-8"}
        runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
        proc = subprocess.run([runuser, "-u", name, "--", *cmd], cwd=self.course, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{' '.join(cmd)} as {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc


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

    def assignments(self, action: str | None = None) -> list[dict]:
        course = {"course_id": class_roster.COURSE_ID, "assignment_id": LAB}
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
    try:
        apply = subprocess.run([sys.executable, str(HUB / "roster.py"), "apply", str(h.roster),
                                "--home-base", str(base / "homes")], env=h.env, capture_output=True, text=True,
                               timeout=120)
        assert apply.returncode == 0, apply.stdout + apply.stderr
        again = subprocess.run(apply.args, env=h.env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and "nothing to do" in again.stdout, \
            f"a second apply should change nothing:\n{again.stdout}{again.stderr}"
        subprocess.run(["useradd", "--create-home", "--base-dir", str(base / "homes"), OUTSIDER], check=True)
        open_python_to((TEACHER, ADA, BOB))
        subprocess.run(["chpasswd"], input="".join(f"{n}:{p}\n" for n, p in h.passwords.items()), text=True,
                       check=True)
        # The test watches the hub through a service token, as an admin dashboard would.
        test_config = h.base / "jupyterhub_test_config.py"
        test_config.write_text(
            "c = get_config()\n"
            f"load_subconfig({str(HUB / 'jupyterhub_config.py')!r})\n"
            f"c.JupyterHub.hub_port = {_free_port()}\n"
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{_free_port()}'\n"
            "c.JupyterHub.last_activity_interval = 5\n"
            "c.Spawner.environment = {'JUPYTERHUB_ACTIVITY_INTERVAL': '5'}\n"
            f"c.JupyterHub.services.append({{'name': 'ltft-test', 'api_token': {h.service_token!r}}})\n"
            "c.JupyterHub.load_roles.append({'name': 'ltft-test', 'scopes': ['read:users', 'read:servers'],"
            " 'services': ['ltft-test']})\n")
        h.log = (base / "jupyterhub.log").open("w")
        h.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(test_config)],
                                  cwd=base, env=h.env, stdout=h.log, stderr=subprocess.STDOUT)

        def healthy():
            if h.proc.poll() is not None:
                pytest.fail(f"the hub exited:\n{(base / 'jupyterhub.log').read_text()[-4000:]}")
            try:
                return requests.get(f"{h.url}/hub/health", timeout=5).status_code == 200
            except requests.RequestException:
                return False
        wait_until(healthy, 120, "the hub to answer")
        yield h
    finally:
        if h.proc is not None:
            h.proc.send_signal(signal.SIGTERM)       # cleanup_servers: the hub stops every server first
            try:
                h.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                h.proc.kill()
                h.proc.wait(timeout=10)
            h.log.close()
            print(f"--- the hub's log (last lines)\n{(base / 'jupyterhub.log').read_text()[-6000:]}")
        remove_test_accounts()
        shutil.rmtree(base, ignore_errors=True)


def solution_source() -> str:
    nb = nbformat.read(str(ROOT / "solutions" / LAB / f"{LAB}.ipynb"), as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "greedy_token")


def with_answer(nb, source: str):
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "greedy_token":
            c.source = source
            return nb
    pytest.fail("the released lab00 has no greedy_token cell")


def feedback_score(person: Person) -> str:
    listing = person.get(f"api/contents/{LAB}/feedback").json()
    [stamp] = [item["path"] for item in listing["content"] if item["type"] == "directory"]
    r = person.get(f"api/contents/{stamp}/{LAB}.html", params={"content": 1, "type": "file", "format": "text"})
    html = r.json()["content"]
    m = re.search(rf"{LAB} \(Score: ([0-9.]+) / ([0-9.]+)\)", html)
    assert m, f"no score in {person.name}'s feedback"
    return f"{float(m.group(1)):g}/{float(m.group(2)):g}"


@needs_root
def test_a_class_on_the_hub(hub_class):
    h = hub_class
    teacher, ada, bob = Person(h, TEACHER), Person(h, ADA), Person(h, BOB)

    # Login: the roster decides who gets in; PAM checks the password.
    assert not Person(h, ADA).login("not-the-password"), "a wrong password must not log in"
    assert not Person(h, OUTSIDER).login(h.passwords[OUTSIDER]), "a system user not on the roster must not log in"
    for p in (teacher, ada, bob):
        assert p.login(h.passwords[p.name]), f"{p.name} could not log in with their password"
    assert h.api(f"users/{TEACHER}")["admin"] and not h.api(f"users/{ADA}")["admin"]
    for name in (ADA, BOB):
        assert os.stat(pwd.getpwnam(name).pw_dir).st_mode & 0o077 == 0, f"{name}'s home must be private"
    assert h.course.stat().st_mode & 0o7777 == 0o2770 and h.exchange.stat().st_mode & 0o7777 == 0o1777

    # The instructor generates and releases lab00 from formgrader, in the course folder.
    teacher.start()
    assert teacher.get("formgrader").status_code == 200
    teacher.post(f"formgrader/api/assignment/{LAB}/assign")
    teacher.post(f"formgrader/api/assignment/{LAB}/release")
    assert (h.exchange / class_roster.COURSE_ID / "outbound" / LAB / f"{LAB}.ipynb").is_file()
    gid = grp.getgrnam(GROUP).gr_gid
    for folder in ("outbound", "inbound"):          # every instructor can collect, not only who released
        st = (h.exchange / class_roster.COURSE_ID / folder).stat()
        assert st.st_gid == gid and st.st_mode & 0o020, f"exchange {folder} is not the instructors' to write"

    # Students: the Assignments tab, no instructor tools.
    for student, answer in ((ada, solution_source()), (bob, CHEAT)):
        student.start()
        assert student.get("formgrader").status_code == 404, "students must not reach formgrader"
        page = student.get("lab").text
        assert "@jupyter/nbgrader:formgrader" in page and "@jupyter/nbgrader:create-assignment" in page, \
            "the student's JupyterLab must list the instructor plugins as disabled"
        released = student.assignments()
        assert [a["status"] for a in released if a["assignment_id"] == LAB] == ["released"], released
        student.assignments("fetch")
        path = f"{LAB}/{LAB}.ipynb"
        student.save(path, with_answer(student.notebook(path), answer))
        after = student.assignments("submit")
        assert any(a["status"] == "submitted" for a in after if a["assignment_id"] == LAB), after

    # The instructor collects in formgrader and autogrades: nbgrader's in-kernel scores.
    teacher.start()                       # again, if the culler stopped it meanwhile
    teacher.post(f"formgrader/api/assignment/{LAB}/collect")
    # Autograding runs every notebook: in a terminal, since formgrader's request would hold
    # the server busy for longer than the test's short culler allows.
    h.as_user(TEACHER, "nbgrader", "autograde", LAB, timeout=600)

    def scores():
        subs = teacher.get(f"formgrader/api/submissions/{LAB}").json()
        return {s["student"]: s["score"] for s in subs if s["student"] in (ADA, BOB)}
    in_kernel = scores()
    print(f"nbgrader autograde (in-kernel) scores: {in_kernel}")
    teacher.start()
    assert in_kernel[ADA] == POINTS, in_kernel

    # In a terminal: the isolated grader, then its scores into the gradebook.
    h.as_user(TEACHER, "python", "-m", "autograder", "grade", "submitted", "--lab", LAB, "--out", f"grades/{LAB}")
    sync = h.as_user(TEACHER, "python", "-m", "autograder", "gradebook-sync", "--lab", LAB,
                     "--grades", f"grades/{LAB}", "--db", class_roster.Place(h.course, h.exchange, GROUP).db_url)
    teacher.start()
    isolated = scores()
    assert isolated == {ADA: POINTS, BOB: 0.0}, (
        f"after gradebook-sync formgrader shows {isolated} (nbgrader's own: {in_kernel})\n{sync.stdout}")
    h.as_user(TEACHER, "nbgrader", "generate_feedback", LAB)
    teacher.start()
    teacher.post(f"formgrader/api/assignment/{LAB}/release_feedback")

    # The culler stops servers nobody uses; the students' files stay.
    wait_until(lambda: not h.api(f"users/{ADA}")["servers"] and not h.api(f"users/{BOB}")["servers"],
               CULL_AFTER * 6, "the idle culler to stop the students' servers", every=2)
    for student, expect in ((ada, "6/6"), (bob, "0/6")):
        student.start()
        kept = student.notebook(f"{LAB}/{LAB}.ipynb")
        assert any(c.source == (solution_source() if student is ada else CHEAT) for c in kept.cells), \
            f"{student.name}'s work did not survive the culler"
        student.assignments("fetch_feedback")
        assert feedback_score(student) == expect, f"{student.name}'s feedback"


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
