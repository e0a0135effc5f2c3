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
