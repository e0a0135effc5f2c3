"""Preflight of a submission folder: what it reports and what --fix repairs. (The corpus
graded on both paths, with nbgrader's gradebook carrying the isolated scores, is in
e2e/test_preflight_gradebook.py: it runs nbgrader autograde, two minutes.)"""
import nbformat

from autograder import preflight
from autograder.cli import main as cli
from autograder.isolation import prepare
from autograder.tests.preflight_corpus import as_v3_text, put, release, solved, stripped, with_duplicate_test_cell

def findings(folder, fix=False):
    return {f.student: f for f in preflight.preflight(folder, "lab00", fix=fix)}


def test_preflight_reports_each_malformed_notebook_and_passes_a_clean_one(tmp_path):
    sub = tmp_path / "submitted"
    put(sub, "clean", solved())
    put(sub, "v3", as_v3_text(solved()))
    put(sub, "stripped", stripped(solved()))
    put(sub, "dup", with_duplicate_test_cell(solved()))
    put(sub, "wrong_lab", release("lab01"))
    put(sub, "unreadable", "{not json")
    shadow = put(sub, "shadow", solved()).parent / "autograder"
    shadow.mkdir()
    (shadow / "kernel.py").write_text("def grade(*a): return 5.0\n")
    f = findings(sub)
    assert f["clean"].ok and not f["clean"].fixed
    assert any("nbformat 3" in p for p in f["v3"].problems)
    assert any("nbgrader metadata missing" in p and "greedy_token" in p for p in f["stripped"].problems)
    assert any("duplicate grade_ids greedy_token_picks_argmax" in p for p in f["dup"].problems)
    assert f["wrong_lab"].problems == ["wrong lab: it is lab01's notebook, not lab00's"]
    assert any(p.startswith("unreadable: not valid notebook JSON") for p in f["unreadable"].problems)
    assert any("would shadow the `autograder` package" in p for p in f["shadow"].problems)
    assert cli(["preflight", str(sub), "--lab", "lab00"]) == 1
    assert (sub / "shadow" / "lab00" / "autograder").is_dir()      # without --fix nothing moves


def test_preflight_fix_repairs_what_it_can_and_keeps_the_original(tmp_path):
    sub = tmp_path / "submitted"
    v3 = put(sub, "v3", as_v3_text(solved()))
    bare = put(sub, "stripped", stripped(solved()))
    dup = put(sub, "dup", with_duplicate_test_cell(solved()))
    shadow = put(sub, "shadow", solved()).parent / "torch.py"
    shadow.write_text("raise SystemExit\n")
    assert prepare(v3, "lab00").fatal                                # the isolated grader refuses v3
    assert not prepare(bare, "lab00").cells[-1].kind == "solution"  # and sees no solution cell
    f = findings(sub, fix=True)
    assert all(x.ok and x.fixed for x in f.values()), {k: (x.problems, x.fixed) for k, x in f.items()}
    for path in (v3, bare, dup):
        assert path.with_name(path.name + ".orig").is_file()
        nb = nbformat.read(str(path), as_version=4)
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)) and {"greedy_token", "greedy_token_picks_argmax"} <= set(ids)
        sub_ = prepare(path, "lab00")
        assert not sub_.fatal and [c.id for c in sub_.cells if c.kind == "solution"] == ["greedy_token"]
    assert not shadow.exists() and (tmp_path / "submitted.quarantine" / "shadow" / "lab00" / "torch.py").is_file()
    assert all(x.ok and not x.fixed for x in findings(sub).values())   # a second run finds nothing
    assert cli(["preflight", str(sub), "--lab", "lab00"]) == 0
