"""The child's tamper watch (isolation/child.py: _make_watch) puts back, and names, what a
student's code replaced: a property of a course class (not callable), a class attribute,
a classmethod, and anything in the lab's probe modules; an unchanged process reports nothing."""
from __future__ import annotations

import importlib

import pytest

from autograder.isolation.child import _make_watch


@pytest.fixture
def lab07():
    importlib.import_module("autograder.graders.lab07.probes")
    return importlib.import_module("autograder.graders.lab07")


def test_nothing_changed_nothing_reported(lab07):
    assert _make_watch(lab07)() == []


def test_a_replaced_property_of_a_course_class_is_put_back(lab07):
    from course.paged_kv import BlockAllocator
    honest = BlockAllocator.__dict__["num_free"]
    restore = _make_watch(lab07)
    BlockAllocator.num_free = property(lambda self: self.num_blocks)      # "everything is free"
    try:
        assert restore() == ["course.paged_kv.BlockAllocator.num_free"]
    finally:
        BlockAllocator.num_free = honest
    assert BlockAllocator.__dict__["num_free"] is honest
    assert BlockAllocator(4, 2).num_free == 4


@pytest.mark.parametrize("label, change", [
    ("course.batched.EngineConfig.__init__", lambda c: setattr(c, "__init__", lambda self, **kw: None)),
    ("course.paged_kv.KVPool.extra", lambda c: setattr(c, "extra", 1)),
])
def test_class_attributes_and_methods_of_course_classes(lab07, label, change):
    import course.batched
    import course.paged_kv
    owner = {"EngineConfig": course.batched.EngineConfig, "KVPool": course.paged_kv.KVPool}[label.split(".")[2]]
    before = dict(vars(owner))
    restore = _make_watch(lab07)
    change(owner)
    try:
        assert restore() == [label]
    finally:
        for k in [k for k in vars(owner) if k not in before]:
            delattr(owner, k)
        for k, v in before.items():
            if vars(owner).get(k) is not v:
                setattr(owner, k, v)


def test_the_probe_modules_and_the_ledger_are_watched(lab07):
    from autograder import checks
    inputs = lab07._inputs
    honest_counts, honest_blocks = checks.Ledger.counts, inputs._blocks
    restore = _make_watch(lab07)
    checks.Ledger.counts = lambda self: {"num_free": self.num_blocks, "num_used": 0, "high_water": 0}
    inputs._blocks = lambda watch, name: 0
    try:
        assert sorted(restore()) == ["autograder.checks.Ledger.counts", "autograder.graders.lab07._inputs._blocks"]
    finally:
        checks.Ledger.counts, inputs._blocks = honest_counts, honest_blocks
    assert checks.Ledger.counts is honest_counts and inputs._blocks is honest_blocks
