"""`pytest autograder/variants` proves every variant against its lab's hidden graders.

Each bug_*.py / correct_*.py is collected as one file of items (the file is read, never
imported by pytest); the variant is graded once, when its first item runs, in the
in-kernel harness (autograder.variants.proving.grade: the variant's code runs in this
process, inside its notebook unless it imports the reference, and every hidden case is
judged there).
The items:

* `EXPECT_FAIL`: the table names real cases; a bug variant names at least one, a
  correct one none;
* a bug variant: one item per case of its EXPECT_FAIL, marked xfail(strict=True), so a
  grader that lets the bug through shows as XPASS(strict) and fails the run;
* a correct variant: one item per hidden case of its lab, each of which must pass.

    pytest autograder/variants -p no:randomly -n 0 -k lab05
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.variants import proving


def pytest_collect_file(file_path: Path, parent):
    if proving.is_variant(file_path):
        return VariantFile.from_parent(parent, path=file_path)
    return None


class CaseFailed(Exception):
    """A hidden case the variant failed (its message is the grader's)."""


class VariantFile(pytest.File):
    """One variant: its table check and one item per case it is proven on."""

    _results = None

    @property
    def lab(self) -> str:
        return self.path.parent.name

    def results(self) -> dict:
        if self._results is None:
            self._results = proving.grade(self.lab, self.path)
        return self._results

    def collect(self):
        cases = proving.case_names(self.lab)
        yield TableItem.from_parent(self, name="EXPECT_FAIL", cases=cases)
        table = proving.expect_fail(self.path)
        if self.path.name.startswith("bug_"):
            chosen = [(name, case) for name, names in table.items() if name in cases
                      for case in names if case in cases[name]]
        else:
            chosen = [(name, case) for name, names in cases.items() for case in names]
        for name, case in chosen:
            item = CaseItem.from_parent(self, name=f"{name}/{case}", test=name, case=case)
            if self.path.name.startswith("bug_"):
                item.add_marker(pytest.mark.xfail(
                    raises=CaseFailed, strict=True,
                    reason=f"{self.path.stem} must fail {name}/{case}"))
            yield item


class TableItem(pytest.Item):
    def __init__(self, *, cases, **kw):
        super().__init__(**kw)
        self.cases = cases

    def runtest(self):
        wrong = proving.problems(self.path, self.cases)
        assert not wrong, f"{self.path.name}: " + "; ".join(wrong)

    def reportinfo(self):
        return self.path, None, f"{self.parent.lab}/{self.path.name}: EXPECT_FAIL"


class CaseItem(pytest.Item):
    def __init__(self, *, test, case, **kw):
        super().__init__(**kw)
        self.test, self.case = test, case

    def runtest(self):
        result = self.parent.results()[self.test]
        by_name = {c.name: c for c in result.cases}
        got = by_name[self.case]
        if not got.passed:
            raise CaseFailed(f"{self.test}/{self.case}: {got.message}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailed):
            return f"{self.parent.lab}/{self.path.name} fails {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.parent.lab}/{self.path.name}::{self.name}"
