"""nbgrader's submit, with the submission closed to other students.

nbgrader's own submit leaves a submission readable by everyone (the folder mode 0777, the
files 0644) and hides it only behind a name nobody else can list: the inbound folder is
write-only for students, and the name ends in a random string. Anyone who learns the name
(a shared screen, a log) can read it. On this hub the course's inbound folder belongs to
the instructors' group (setgid; hub/roster.py makes it so), so a new submission's folder
belongs to that group too, and this submit closes that folder to everyone else (mode
0770): the student who made it and the instructors reach the files in it (which keep
nbgrader's modes; nobody else can pass through the folder), and the instructors can
delete it. Where the folder did not get the instructors' group it keeps nbgrader's modes,
so collecting still works.

hub/jupyter/common/nbgrader_config.py selects it (ExchangeFactory.submit).

And nbgrader's collect, made to trust nothing a student wrote (PrivateCollect, selected there
too as ExchangeFactory.collect). nbgrader names a submission `student+assignment+time+random`
and keeps a `timestamp.txt` in it, both written by the student's own process, and copies the
folder following links, as the instructor. So a student could backdate a late submission,
submit under a classmate's name, or have a link in their folder copy a classmate's notebook
as theirs. Here:

- a submission counts only when its folder belongs to the user its name claims (the roster's
  ids are the Unix user names); any other is skipped with a warning, never collected;
- its time is the latest change time (ctime) of the folder and everything in it: the kernel
  sets it on every change and no user can set it back, so a submission is as late as its last
  change; that time replaces the name's and is what `timestamp.txt` says in the collected copy
  (late penalties and `--before-duedate` read it);
- a folder holding a link or anything but folders and plain files is skipped with a warning;
- the inbound folder has the sticky bit (hub/roster.py makes it), so no student can rename or
  delete a classmate's submission.
"""
from __future__ import annotations

import os
import stat

from nbgrader.exchange.default.submit import ExchangeSubmit


class PrivateSubmit(ExchangeSubmit):
    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        inbound = os.stat(self.inbound_path)
        if not inbound.st_mode & stat.S_ISGID or os.stat(dest).st_gid != inbound.st_gid:
            self.log.warning("%s is not group-owned by the instructors (setgid): the submission keeps "
                             "nbgrader's modes", self.inbound_path)
            return
        # Only the folder: the student cannot give files made after the copy (timestamp.txt)
        # the instructors' group, so they stay world-readable behind a folder only the group enters.
        os.chmod(dest, 0o770)


import datetime
import glob
import pwd

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc


def _tree(path: str):
    """(latest ctime, first entry that is neither a folder nor a plain file) of the tree at
    `path`, links never followed."""
    latest, bad, pending = os.lstat(path).st_ctime, None, [path]
    while pending:
        with os.scandir(pending.pop()) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                latest = max(latest, st.st_ctime)
                if stat.S_ISDIR(st.st_mode):
                    pending.append(e.path)
                elif not stat.S_ISREG(st.st_mode) and bad is None:
                    bad = e.path
    return latest, bad


class PrivateCollect(ExchangeCollect):
    def init_src(self):
        super().init_src()           # the inbound folder, the due date, and nbgrader's checks
        student = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
        mine = {}
        for path in sorted(glob.glob(pattern)):
            rec = self._path_to_record(path)
            rec["timestamp"] = self._trusted_time(path, rec["username"])
            if rec["timestamp"] is not None:
                mine.setdefault(rec["username"], []).append(rec)
        self.src_records = [self._choose(recs) for recs in mine.values()]

    def _trusted_time(self, path: str, username: str):
        """The submission's time (naive UTC, as nbgrader compares them), or None when it must not
        be collected: a folder its claimed student does not own, or one holding a link or
        anything but folders and plain files."""
        try:
            st = os.lstat(path)
            owner = pwd.getpwuid(st.st_uid).pw_name
        except (OSError, KeyError):
            st, owner = None, None
        if st is None or not stat.S_ISDIR(st.st_mode) or owner != username:
            self.log.warning("%s claims to be %s's submission but belongs to %s: not collected",
                             path, username, owner or "nobody known")
            return None
        latest, bad = _tree(path)
        if bad is not None:
            self.log.warning("%s holds %s, a link or not a plain file: not collected", path, bad)
            return None
        return datetime.datetime.fromtimestamp(latest, datetime.timezone.utc).replace(tzinfo=None)

    def _choose(self, recs: list) -> dict:
        """nbgrader's choice among one student's submissions, on the trusted times: the latest,
        or with --before-duedate the latest before the due date (the latest when none is)."""
        recs = sorted(recs, key=lambda r: r["timestamp"], reverse=True)
        if self.duedate is not None and self.before_duedate:
            due = parse_utc(self.duedate)
            early = [r for r in recs if r["timestamp"] <= due]
            if early:
                return early[0]
        return recs[0]

    def do_copy(self, src, dest, log=None):
        super().do_copy(src, dest, log)
        rec = next((r for r in self.src_records if os.path.join(self.inbound_path, r["filename"]) == src), None)
        if rec is not None:     # the trusted time, over whatever timestamp.txt the student wrote
            when = rec["timestamp"].replace(tzinfo=datetime.timezone.utc)
            with open(os.path.join(dest, "timestamp.txt"), "w", encoding="utf-8") as f:
                f.write(when.strftime(self.timestamp_format))
