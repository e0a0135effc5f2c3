"""The hub's collect trusts nothing a student wrote (hub/ltft_exchange.PrivateCollect): the owner
of a submission's folder says whose it is, its files' change times say when it was made, and a
folder with a link in it is not collected. Each attack below was collected as the student meant
by nbgrader's own collect. Needs root (folders owned by other users); the users are the system's
`nobody` and `daemon`, standing for two students."""
from __future__ import annotations

import datetime
import os
import pwd
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes folders owned by other users: needs root")


def _submit(inbound: Path, student: str, owner: str, stamp: str, files: dict) -> Path:
    folder = inbound / f"{student}+lab01+{stamp}+{os.urandom(4).hex()}"
    folder.mkdir()
    uid = pwd.getpwnam(owner).pw_uid
    for name, text in files.items():
        p = folder / name
        if isinstance(text, Path):
            p.symlink_to(text)
        else:
            p.write_text(text)
        os.lchown(p, uid, uid)
    os.chown(folder, uid, uid)
    return folder


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory) -> Path:
    """A gradebook with lab01 (due 2026-01-01), made once: nbgrader's migrations take seconds."""
    from nbgrader.api import Gradebook
    db = tmp_path_factory.mktemp("gb") / "gradebook.db"
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"     # nbgrader runs `alembic`
    try:
        with Gradebook(f"sqlite:///{db}", "c") as gb:
            gb.add_assignment("lab01", duedate=datetime.datetime(2026, 1, 1))
    finally:
        os.environ["PATH"] = path
    return db


def _collect(course: Path, exchange: Path, gradebook: Path, **kw):
    import shutil
    sys.path.insert(0, str(ROOT / "hub"))
    from ltft_exchange import PrivateCollect
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    shutil.copy(gradebook, course / "gradebook.db")
    cd = CourseDirectory(root=str(course))
    cd.course_id, cd.assignment_id = "c", "lab01"
    cd.db_url = f"sqlite:///{course / 'gradebook.db'}"
    PrivateCollect(coursedir=cd, authenticator=Authenticator(), root=str(exchange), **kw).start()
    return course / "submitted"


@pytest.fixture
def folders(tmp_path) -> tuple[Path, Path, Path]:
    """(exchange, course, inbound), empty."""
    exchange, course = tmp_path / "exchange", tmp_path / "course"
    inbound = exchange / "c" / "inbound"
    inbound.mkdir(parents=True)
    course.mkdir()
    return exchange, course, inbound


def test_collect_believes_no_name_time_or_link_a_student_wrote(folders, gradebook):
    exchange, course, inbound = folders
    # nobody submits late but writes an early time in the name and in timestamp.txt
    _submit(inbound, "nobody", "nobody", "2025-12-31 23:00:00.000000 UTC",
            {"lab01.ipynb": "mine", "timestamp.txt": "2025-12-31 23:00:00.000000 UTC"})
    # nobody also makes a folder in daemon's name
    _submit(inbound, "daemon", "nobody", "2025-12-31 22:00:00.000000 UTC", {"lab01.ipynb": "forged for daemon"})
    started = time.time()
    out = _collect(course, exchange, gradebook)
    got = sorted(p.name for p in out.iterdir())
    assert got == ["nobody"], got                      # nothing collected in daemon's name
    sub = out / "nobody" / "lab01"
    assert (sub / "lab01.ipynb").read_text() == "mine"
    stamp = (sub / "timestamp.txt").read_text()
    from nbgrader.utils import parse_utc
    when = parse_utc(stamp)
    assert when > datetime.datetime(2026, 6, 1), stamp     # the change time, not the 2025 the student wrote
    assert abs(when.replace(tzinfo=datetime.timezone.utc).timestamp() - started) < 120


def test_a_submission_holding_a_link_is_not_collected(folders, gradebook, tmp_path):
    exchange, course, inbound = folders
    secret = tmp_path / "classmate.ipynb"
    secret.write_text("a classmate's notebook")
    _submit(inbound, "daemon", "daemon", "2026-12-01 10:00:00.000000 UTC",
            {"lab01.ipynb": secret, "timestamp.txt": "2026-12-01 10:00:00.000000 UTC"})
    out = _collect(course, exchange, gradebook)
    assert not out.exists() or not any(out.iterdir())


def test_the_roster_gives_the_inbound_folder_the_sticky_bit():
    sys.path.insert(0, str(ROOT / "hub"))
    import roster
    assert roster.INBOUND_MODE & 0o1000 and roster.INBOUND_MODE & 0o2000 and not roster.INBOUND_MODE & 0o004
    assert "inbound" in (ROOT / "hub" / "roster.py").read_text() and \
        'c.ExchangeFactory.collect = "ltft_exchange.PrivateCollect"' in \
        (ROOT / "hub" / "jupyter" / "common" / "nbgrader_config.py").read_text()


def test_apply_closes_the_roster_to_everyone_but_root(tmp_path):
    sys.path.insert(0, str(ROOT / "hub"))
    import roster
    path = tmp_path / "roster.csv"
    path.write_text("id,role,email\nann,student,ann@example.edu\n")
    os.chmod(path, 0o644)
    assert roster.close_roster(path, dry_run=True) and (path.stat().st_mode & 0o777) == 0o644
    assert roster.close_roster(path) and (path.stat().st_mode & 0o777) == 0o600 and path.stat().st_uid == 0
    assert roster.close_roster(path) == []
