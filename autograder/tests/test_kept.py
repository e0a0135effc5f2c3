"""The files the graders read (kept expected values, fixtures, the tiny model, configs) carry
digests committed with the graders (autograder/kept.py): a file changed after it was committed
stops grading, with a message naming it, before anyone is graded or a kept value is trusted."""
from __future__ import annotations

import shutil

import pytest

from autograder import cli, kept, memo
from autograder.batch import Entry, grade_batch
from autograder.tests.submissions import solution


def test_the_manifest_is_current_and_covers_every_kind_of_kept_file():
    assert kept.changed() == [], "run `python -m autograder.kept` and commit autograder/graders/kept_files.json"
    names = kept.files()
    for want in ("autograder/graders/lab04/_expected.pt", "autograder/graders/lab05/_expected.pt",
                 "datasets/fixtures/peaked.json", "datasets/tiny-model/model.safetensors",
                 "datasets/configs/llama-3-8b/config.json"):
        assert want in names


def test_a_changed_added_or_missing_file_is_named(tmp_path):
    root = tmp_path / "repo"
    for name in kept.files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(kept.ROOT / name, root / name)
    (root / kept.MANIFEST.relative_to(kept.ROOT)).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(kept.MANIFEST, root / kept.MANIFEST.relative_to(kept.ROOT))
    kept.verify(root)
    with open(root / "autograder/graders/lab04/_expected.pt", "ab") as f:
        f.write(b"\0")
    (root / "datasets/fixtures/peaked.json").unlink()
    (root / "datasets/fixtures/extra.json").write_text("{}")
    with pytest.raises(kept.KeptFileChanged) as e:
        kept.verify(root)
    for name in ("lab04/_expected.pt", "fixtures/peaked.json", "fixtures/extra.json"):
        assert name in str(e.value)
    assert "fixtures/flat.json" not in str(e.value)


def _tampered(monkeypatch, name):
    real = kept.committed
    monkeypatch.setattr(kept, "committed", lambda root=kept.ROOT: {**real(root), name: "0" * 64})


def test_the_memo_refuses_a_rewritten_file_whose_fingerprint_still_matches(monkeypatch):
    """The attack: _expected.pt rewritten with other values but today's fingerprint. Before, the
    memo trusted it; now reading it stops the grading."""
    _tampered(monkeypatch, "autograder/graders/lab04/_expected.pt")
    memo._stored.cache_clear()
    try:
        with pytest.raises(kept.KeptFileChanged, match="lab04/_expected.pt"):
            memo.expected("lab04", next(iter(memo.memo_module("lab04").MEMO)))
    finally:
        memo._stored.cache_clear()


def test_a_batch_grades_nobody_when_a_kept_file_changed(monkeypatch, tmp_path, capsys):
    _tampered(monkeypatch, "datasets/fixtures/peaked.json")
    sub = tmp_path / "subs" / "ann.ipynb"
    sub.parent.mkdir()
    shutil.copy(solution("lab00"), sub)
    with pytest.raises(kept.KeptFileChanged, match="fixtures/peaked.json"):
        grade_batch([Entry("ann", sub)], "lab00", tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out" / "students").exists()
    assert cli.main(["grade", str(sub.parent), "--lab", "lab00", "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "grading stopped" in err and "fixtures/peaked.json" in err and "Traceback" not in err
