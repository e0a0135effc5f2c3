"""nbgrader's submit, with the submission closed to other students.

nbgrader's own submit leaves a submission readable by everyone (the folder mode 0777, the
files 0644) and hides it only behind a name nobody else can list: the inbound folder is
write-only for students, and the name ends in a random string. Anyone who learns the name
(a shared screen, a log) can read it. On this hub the course's inbound folder belongs to
the instructors' group (setgid; hub/roster.py makes it so), so a new submission belongs to
that group too, and this submit closes it to everyone else: folders 0770, files 0660 (the
student who made it and the instructors read it; the instructors can delete it). Where
inbound is not group-owned that way it keeps nbgrader's modes, so collecting still works.

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
        if not os.stat(self.inbound_path).st_mode & stat.S_ISGID:
            self.log.warning("%s is not group-owned by the instructors (setgid): the submission keeps "
                             "nbgrader's modes", self.inbound_path)
            return
        for folder, _, files in os.walk(dest):
            for name in files:
                os.chmod(os.path.join(folder, name), 0o660)
            os.chmod(folder, 0o770)
