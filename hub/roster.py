"""The class roster, and what the hub needs on the machine before it starts.

    sudo .venv/bin/python hub/roster.py apply hub/roster.csv     # `make hub` runs this first
    .venv/bin/python hub/roster.py check hub/roster.csv          # validate only; changes nothing
    .venv/bin/python hub/roster.py config                        # the course folder's nbgrader_config.py

A roster is a CSV file whose header names at least `id` and `role` (roster.example.csv
adds first_name, last_name and email). `id` is the login name and the Unix user name;
`role` is `student` or `instructor`. nbgrader's `nbgrader db student import` reads the
same file (it ignores the role column).

`apply` (as root) makes, and on a second run only adds what is missing:
- a system user with a private home folder (mode 0700) for every id that has none (no
  password: set one with `passwd` for PAM login, or let the LMS log them in with LTI 1.3);
- the instructors' group (LTFT_INSTRUCTORS_GROUP, default ltft-instructors) with every
  instructor in it;
- the course folder (LTFT_COURSE_DIR, default /srv/ltft/course): owned by that group,
  setgid, closed to everyone else, with the nbgrader_config.py that points nbgrader at
  the repository's solutions/ and keeps release/, submitted/, autograded/, feedback/,
  grades/ and gradebook.db there;
- nbgrader's exchange (LTFT_EXCHANGE, default /srv/nbgrader/exchange): world-writable
  with the sticky bit, as nbgrader needs, and in it the course's folder, owned by the
  instructors' group (setgid), so every instructor can release, collect and return feedback;
- every student in the course's gradebook (names and email for `nbgrader export`).
It removes nothing: someone dropped from the roster can no longer log in (the hub reads
the roster when it starts), but their user, home folder and grades stay.
"""
from __future__ import annotations

import argparse
import csv
import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COURSE_ID = "logit-to-first-token"
ROLES = ("student", "instructor")
INBOUND_MODE = 0o3773      # setgid, sticky; rwx for root and the instructors, wx for students
# A portable Unix user name (useradd's default NAME_REGEX, without the trailing $).
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")

COURSE_CONFIG = '''"""nbgrader configuration of the course on the hub: written by hub/roster.py apply
(rerunning it rewrites this file; change hub/roster.py instead).

Sources are the course repository's solutions/, read-only; everything grading makes
(release/, submitted/, autograded/, feedback/, gradebook.db) lives in this folder,
shared by the instructors' group. Stubs and timeouts match the repository's
nbgrader_config.py.
"""
c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.source_directory = {source!r}
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.db_url = {db_url!r}
c.CourseDirectory.groupshared = True   # files nbgrader writes stay writable by every instructor
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__"]
c.Exchange.root = {exchange!r}

# Submitted notebooks run in a kernel inside bubblewrap, away from this folder, the grades and
# the graders (autograder/sandboxed_kernel.py)
from autograder.sandboxed_kernel import configure  # noqa: E402

configure(c)

c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
'''


@dataclass(frozen=True)
class Member:
    id: str
    role: str
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None


@dataclass(frozen=True)
class Roster:
    members: tuple[Member, ...]

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.members]

    @property
    def students(self) -> list[str]:
        return [m.id for m in self.members if m.role == "student"]

    @property
    def instructors(self) -> list[str]:
        return [m.id for m in self.members if m.role == "instructor"]

    def role(self, name: str) -> str | None:
        """The role of login `name`, or None if the roster does not list it."""
        return next((m.role for m in self.members if m.id == name), None)

    def login(self, name: str) -> str | None:
        """The roster id for the name an identity provider sends (an id, or an email
        address, compared without case), or None if nobody on the roster has it."""
        if not isinstance(name, str) or not name:
            return None
        for m in self.members:
            if m.id == name or (m.email and m.email.lower() == name.lower()):
                return m.id
        return None


def lti13_authenticator(roster: Roster):
    """An LTI13Authenticator that logs in the roster member whose email (or id) the LMS
    sends, under their roster id, and refuses everyone else."""
    from ltiauthenticator.lti13.auth import LTI13Authenticator

    class RosterLTI13Authenticator(LTI13Authenticator):
        async def authenticate(self, handler, data=None):
            model = await super().authenticate(handler, data)
            name = roster.login(model["name"]) if model else None
            if name is None:
                self.log.warning("LTI 1.3 login of %r refused: not on the roster", model and model["name"])
                return None
            return {**model, "name": name}

    return RosterLTI13Authenticator


def read_roster(path: str | os.PathLike) -> Roster:
    """Read and validate a roster CSV; a bad row raises ValueError naming its line."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"`roster` must be a CSV file (copy hub/roster.example.csv), got {str(path)!r}.")
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        fields = [f.strip() for f in (reader.fieldnames or [])]
        for need in ("id", "role"):
            if need not in fields:
                raise ValueError(f"{path}: the header must name `{need}`, got {fields!r}.")
        members, seen_ids, seen_emails = [], set(), set()
        for row in reader:
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            where = f"{path}, line {reader.line_num}"
            if not any(row.values()):
                continue
            uid, role, email = row.get("id", ""), row.get("role", ""), row.get("email", "")
            if not USER_NAME.fullmatch(uid):
                raise ValueError(f"{where}: `id` must be a Unix user name (lowercase letters, digits, "
                                 f"_ and -, at most 32, not starting with a digit or -), got {uid!r}.")
            if role not in ROLES:
                raise ValueError(f"{where}: `role` must be one of {', '.join(ROLES)}, got {role!r}.")
            if uid in seen_ids:
                raise ValueError(f"{where}: `id` must be unique, got {uid!r} twice.")
            if email and email.lower() in seen_emails:
                raise ValueError(f"{where}: `email` must be unique (LTI logins are matched by it), got {email!r} twice.")
            seen_ids.add(uid)
            if email:
                seen_emails.add(email.lower())
            members.append(Member(uid, role, row.get("first_name") or None, row.get("last_name") or None,
                                  email or None))
    if not any(m.role == "instructor" for m in members):
        raise ValueError(f"{path}: the roster must list at least one instructor, got none.")
    return Roster(tuple(members))


@dataclass(frozen=True)
class Place:
    """Where the course lives on the machine."""
    course_dir: Path
    exchange: Path
    group: str

    @classmethod
    def from_env(cls, env=None) -> "Place":
        env = os.environ if env is None else env
        return cls(Path(env.get("LTFT_COURSE_DIR", "/srv/ltft/course")),
                   Path(env.get("LTFT_EXCHANGE", "/srv/nbgrader/exchange")),
                   env.get("LTFT_INSTRUCTORS_GROUP", "ltft-instructors"))

    @property
    def db_url(self) -> str:
        return "sqlite:///" + str(self.course_dir / "gradebook.db")


def closed_folders(path: str | os.PathLike) -> list[Path]:
    """The folders above `path` (links resolved) that other users cannot pass through: the
    hub starts servers as other users with this interpreter, so there must be none (a
    Python under /root, mode 0700, is the usual one)."""
    real = Path(os.path.realpath(path))
    return [d for d in reversed(real.parents) if not os.stat(d).st_mode & 0o001]


TIMING_SWITCH = "LTFT_HUB_RECORD_TIMING"


def record_timing(value: str | None) -> bool:
    """The instructor's timing switch (hub/README.md, "Timing the exercises"): off unless
    set to 1. On, students' JupyterLab writes when each cell ran into the notebook."""
    if value in (None, "", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"`{TIMING_SWITCH}` must be 0 or 1, got {value!r}.")


def student_config_path(course: str | os.PathLike, timing: bool) -> list[str]:
    """A student's JUPYTER_CONFIG_PATH, first wins: the timing switch's folder only when it
    is on (its labconfig/default_setting_overrides.json sets JupyterLab's recordTiming),
    the students' settings, the common ones. `course` is the course repository."""
    jupyter = Path(course) / "hub" / "jupyter"
    return [str(jupyter / d) for d in (["timing"] if timing else []) + ["student", "common"]]


def course_config(place: Place) -> str:
    """The text of the course folder's nbgrader_config.py."""
    return COURSE_CONFIG.format(root=str(place.course_dir), course_id=COURSE_ID,
                                source=str(REPO / "solutions"), db_url=place.db_url,
                                exchange=str(place.exchange))


def _run(cmd: list[str]) -> None:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])   # sudo may leave sbin out
    proc = subprocess.run([shutil.which(cmd[0], path=search) or cmd[0], *cmd[1:]], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")


def apply(roster: Roster, place: Place, *, home_base: str | None = None, dry_run: bool = False) -> list[str]:
    """Make users, group, course folder, exchange and gradebook students (see the module
    docstring). Returns one line per change; nothing when everything was already there."""
    if not dry_run and os.geteuid() != 0:
        raise PermissionError("`apply` creates users and folders: run it as root (sudo), or pass --dry-run.")
    done = []

    def act(what: str, *cmd_or_fn):
        done.append(what)
        if dry_run:
            return
        for step in cmd_or_fn:
            step() if callable(step) else _run(step)

    try:
        members_of_group = set(grp.getgrnam(place.group).gr_mem)
    except KeyError:
        act(f"group {place.group}", ["groupadd", place.group])
        members_of_group = set()
    for m in roster.members:
        try:
            pwd.getpwnam(m.id)
        except KeyError:
            cmd = ["useradd", "--create-home", "--shell", "/bin/bash"]
            if home_base:
                cmd += ["--base-dir", home_base]
            if m.first_name or m.last_name:
                cmd += ["--comment", " ".join(p for p in (m.first_name, m.last_name) if p)]
            # Debian's useradd leaves a new home world-readable (0755): close it, so nobody
            # reads another student's notebooks; work moves only through the exchange.
            act(f"user {m.id} ({m.role}), home mode 0700", cmd + [m.id],
                lambda uid=m.id: os.chmod(pwd.getpwnam(uid).pw_dir, 0o700))
        if m.role == "instructor" and m.id not in members_of_group:
            act(f"{m.id} joins group {place.group}", ["usermod", "--append", "--groups", place.group, m.id])

    gid = None if dry_run else grp.getgrnam(place.group).gr_gid   # made above, unless dry_run
    course = place.course_dir
    if not course.is_dir():
        act(f"course folder {course}", lambda: course.mkdir(parents=True))
    if not dry_run:
        st = course.stat()
        if st.st_gid != gid or (st.st_mode & 0o7777) != 0o2770:
            act(f"{course}: group {place.group}, mode 2770",
                lambda: os.chown(course, 0, gid), lambda: os.chmod(course, 0o2770))
    config = course / "nbgrader_config.py"
    text = course_config(place)
    if not config.is_file() or config.read_text() != text:
        act(f"{config}", lambda: config.write_text(text), lambda: os.chown(config, 0, gid),
            lambda: os.chmod(config, 0o664))

    exchange = place.exchange
    if not exchange.is_dir() or (exchange.stat().st_mode & 0o7777) != 0o1777:
        act(f"exchange {exchange} (mode 1777)", lambda: exchange.mkdir(parents=True, exist_ok=True),
            lambda: os.chmod(exchange, 0o1777))
    # The course's own folder in the exchange belongs to the instructors' group (setgid), so
    # the outbound, inbound and feedback folders whichever instructor releases first makes
    # there stay writable by the others (nbgrader's groupshared).
    shared = exchange / COURSE_ID
    if not shared.is_dir() or (not dry_run and ((shared.stat().st_mode & 0o7777) != 0o2775
                                                or shared.stat().st_gid != gid)):
        act(f"{shared}: group {place.group}, mode 2775", lambda: shared.mkdir(parents=True, exist_ok=True),
            lambda: os.chown(shared, 0, gid), lambda: os.chmod(shared, 0o2775))
    # The inbound folder as nbgrader makes it (students may enter and write, not list), plus the
    # sticky bit: a submission can be renamed or deleted only by the student who made it (nbgrader
    # leaves an existing folder's mode alone).
    inbound = shared / "inbound"
    if not inbound.is_dir() or (not dry_run and ((inbound.stat().st_mode & 0o7777) != INBOUND_MODE
                                                 or inbound.stat().st_gid != gid)):
        act(f"{inbound}: group {place.group}, mode {INBOUND_MODE:o} (sticky)",
            lambda: inbound.mkdir(parents=True, exist_ok=True),
            lambda: os.chown(inbound, 0, gid), lambda: os.chmod(inbound, INBOUND_MODE))

    if roster.students:
        added = [] if dry_run else _gradebook_students(roster, place, gid)
        if dry_run or added:
            done.append(f"gradebook: {len(added) if not dry_run else len(roster.students)} student(s) added or updated")
    return done


def _gradebook_students(roster: Roster, place: Place, gid: int) -> list[str]:
    from nbgrader.api import Gradebook
    # nbgrader runs the `alembic` command beside this interpreter; `sudo` may have dropped it from PATH.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    changed = []
    with Gradebook(place.db_url) as gb:
        have = {s.id: (s.first_name, s.last_name, s.email) for s in gb.students}
        for m in roster.members:
            if m.role == "student" and have.get(m.id) != (m.first_name, m.last_name, m.email):
                gb.update_or_create_student(m.id, first_name=m.first_name, last_name=m.last_name, email=m.email)
                changed.append(m.id)
    db = place.course_dir / "gradebook.db"
    os.chown(db, 0, gid)
    os.chmod(db, 0o660)
    return changed


def close_roster(path: Path, *, dry_run: bool = False) -> list[str]:
    """The roster holds every student's name and email: readable by root alone (the hub reads it
    as root). One line when its mode changes."""
    if (path.stat().st_mode & 0o077) == 0 and path.stat().st_uid == 0:
        return []
    if not dry_run:
        os.chown(path, 0, 0)
        os.chmod(path, 0o600)
    return [f"{path}: root only (mode 600): it holds every student's name and email"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Check a class roster, or make the users, groups and folders the hub needs.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("check", help="validate the roster and print who is in it")
    p.add_argument("roster")
    sub.add_parser("config", help="print the course folder's nbgrader_config.py (LTFT_COURSE_DIR, LTFT_EXCHANGE)")
    p = sub.add_parser("apply", help="as root: users, instructors' group, course folder, exchange, gradebook students")
    p.add_argument("roster")
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    p.add_argument("--home-base", default=None, help="where new home folders go (useradd's default: /home)")
    ns = ap.parse_args(argv)
    if ns.cmd == "config":
        print(course_config(Place.from_env()), end="")
        return 0
    try:
        roster = read_roster(ns.roster)
        if ns.cmd == "check":
            print(f"{ns.roster}: {len(roster.students)} student(s), {len(roster.instructors)} instructor(s): "
                  f"{', '.join(roster.instructors)}")
            return 0
        place = Place.from_env()
        changes = apply(roster, place, home_base=ns.home_base, dry_run=ns.dry_run)
        changes += close_roster(Path(ns.roster), dry_run=ns.dry_run)
    except (ValueError, PermissionError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    verb = "would make" if ns.dry_run else "made"
    for line in changes:
        print(f"{verb}: {line}")
    if not changes:
        print(f"nothing to do: {len(roster.ids)} member(s), course {place.course_dir}, exchange {place.exchange}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
