"""Hostile scratch: a child's tree, however deep or large, neither stops a batch nor fills the
grading machine's disk.

- remove_tree (autograder/isolation/child.py) clears what a child left in a loop, not a
  recursion, and never follows a link; shutil.rmtree raised RecursionError on a chain of
  3,000 folders, which ignore_errors does not catch, and the batch stopped.
- Where scratch is a folder on disk (weak isolation, the container tier) the zygote measures
  it while the child runs and stops the child past SCRATCH_SIZE or SCRATCH_FILES; the
  container tier's seccomp filter answers fallocate with EOPNOTSUPP, so a preallocation
  becomes writes that RLIMIT_FSIZE and that watch bound.
"""
from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from autograder.isolation import Limits, Runtime, Sandbox, grade_isolated, prepare, seccomp_filter
from autograder.isolation.child import remove_tree, scratch_over
from autograder.isolation.limits import SCRATCH_FILES, SCRATCH_SIZE
from autograder.tests.submissions import solution, with_solution_code, write


def _chain(top, depth: int, outside) -> None:
    """`depth` nested folders under `top` (fd-relative: the path is longer than PATH_MAX), with a
    link to `outside` and a file every 500 levels."""
    fd = os.open(top, os.O_RDONLY)
    cur = fd
    for i in range(depth):
        os.mkdir("d", dir_fd=cur)
        nxt = os.open("d", os.O_RDONLY, dir_fd=cur)
        if i % 500 == 0:
            os.symlink(outside, "link", dir_fd=nxt)
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=nxt))
        if cur != fd:
            os.close(cur)
        cur = nxt
    os.close(cur)
    os.close(fd)


def test_remove_tree_clears_a_deep_chain_that_rmtree_cannot_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("a classmate's file")
    deep = tmp_path / "deep"
    deep.mkdir()
    _chain(deep, 3000, outside)
    with pytest.raises(RecursionError):
        shutil.rmtree(deep, ignore_errors=True)
    remove_tree(deep)
    assert not deep.exists() and (outside / "keep.txt").read_text() == "a classmate's file"


def test_remove_tree_takes_back_folders_made_unreadable_and_plain_files_and_links(tmp_path):
    top = tmp_path / "scratch"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "x").write_text("x")
    os.chmod(top / "a" / "b", 0)
    os.chmod(top / "a", stat.S_IRUSR | stat.S_IXUSR)
    remove_tree(top)
    assert not top.exists()
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    remove_tree(link)                                  # the link goes, what it points to stays
    assert not link.is_symlink() and target.is_dir()
    remove_tree(tmp_path / "missing")                  # nothing there: nothing raised


def test_scratch_over_counts_allocated_bytes_and_entries_and_stops_early(tmp_path):
    assert scratch_over(str(tmp_path), 1 << 20, 100) is None
    with open(tmp_path / "big", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, 2 << 20)     # allocated, never written: it still counts
    assert "MiB" in scratch_over(str(tmp_path), 1 << 20, 100)
    for i in range(20):
        (tmp_path / f"f{i}").touch()
    assert scratch_over(str(tmp_path), 1 << 30, 10).endswith("entries")


def test_the_container_filter_answers_fallocate_with_eopnotsupp():
    for arch in seccomp_filter.ARCHES:
        prog = seccomp_filter.build(arch)
        nr = seccomp_filter.SYSCALLS[arch]["fallocate"]
        i = prog.index((0x15, 0, 1, nr))
        assert prog[i + 1] == (0x06, 0, 0, seccomp_filter.RET_ERRNO | seccomp_filter.EOPNOTSUPP)


FILLER = '''
import os
n = 0
try:
    while True:                       # small files: each under RLIMIT_FSIZE, together past the bound
        with open(f"fill{n}.bin", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 8 << 20)
        n += 1
except OSError as e:
    print("stopped:", e)


def greedy_token(logits):
    return 0
'''

DEEP = '''
import os
here = os.getcwd()
os.mkdir(here + "/chain")
for _ in range(1500):                 # past Python's recursion limit, so shutil.rmtree cannot clear it
    os.mkdir(here + "/t")             # each step at the top: the chain grows one level below "t"
    os.rename(here + "/chain", here + "/t/d")
    os.rename(here + "/t", here + "/chain")
print("depth", 1501)


def greedy_token(logits):
    return 0
'''


def _tier() -> str:
    """The tier whose scratch is a folder on disk: the container tier under e2e/test_container.py's
    emulation (AUTOGRADER_EXPECT_TIER=container), weak isolation everywhere else."""
    return "container" if os.environ.get("AUTOGRADER_EXPECT_TIER") == "container" else "python"


@pytest.mark.slow
def test_scratch_on_disk_is_bounded_and_a_deep_tree_does_not_stop_the_next_student(tmp_path):
    """The filler is stopped with a message naming the bound, the deep tree is cleared, and the
    solution graded after both on the same worker gets full marks."""
    subs = {name: write(with_solution_code("lab00", {}, first=code), tmp_path / f"{name}.ipynb")
            for name, code in (("filler", FILLER), ("deep", DEEP))}
    with Runtime("lab00", sandbox=Sandbox.detect(_tier())) as rt:
        filler = grade_isolated(prepare(subs["filler"], "lab00"), rt, limits=Limits(file_size=64 << 20))
        deep = grade_isolated(prepare(subs["deep"], "lab00"), rt)
        honest = grade_isolated(prepare(solution("lab00"), "lab00"), rt)
        where = rt.jail.dir if rt.jail else rt.base
        left = [p for p in where.iterdir() if p.name.startswith("scratch-")]
        assert all(not any(p.iterdir()) for p in left), "a child's files outlived it"
    said = json.dumps(filler.problems)
    assert filler.score == 0 and f"{SCRATCH_SIZE >> 20} MiB or {SCRATCH_FILES} entries" in said, said
    assert deep.score == 0
    assert honest.score == honest.max_score, honest.problems
