"""The grader core: plain data only, clear judgements, harness never raises."""
import math

import pytest
import torch

from autograder.core import (Case, CaseResult, Fail, NotPlain, Pending, Test, as_tensor, close, probe_case,
                             run_test, to_plain)
from autograder.kernel import check, grade


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_to_plain_refuses_objects_that_cheat_comparison():
    with pytest.raises(NotPlain, match="subclass of int"):
        to_plain(AlwaysEqual(3))
    with pytest.raises(NotPlain, match="subclass of int"):
        to_plain({"x": [AlwaysEqual(3)]})
    with pytest.raises(NotPlain, match="type object"):
        to_plain(object())


def test_to_plain_round_trips_tensors():
    x = torch.tensor([[1.0, -math.inf], [math.nan, 2.0]])
    back = as_tensor(to_plain(x))
    assert back.dtype == torch.float32 and back.shape == (2, 2)
    assert torch.equal(back.nan_to_num(0.0), x.nan_to_num(0.0))


def test_close_points_at_the_real_difference_not_at_shared_infinities():
    e = torch.tensor([-math.inf, 1.0, 2.0])
    g = torch.tensor([-math.inf, 1.0, 2.5])
    with pytest.raises(Fail, match="flat index 2") as info:
        close(g, e)
    assert info.value.expected == 2.0 and info.value.got == 2.5
    close(e.clone(), e)  # equal tensors with -inf pass


def _case(probe, name="c", points=2, **kw):
    return Case(name, points, probe, ("p", [], {}), **kw)


def test_a_probe_turns_every_student_error_into_a_zero_with_a_message():
    def boom(ns):
        raise KeyError("nope")
    r = probe_case(_case(boom), {})
    assert not r.passed and r.points == 0 and "KeyError" in r.message
    r = probe_case(_case(lambda ns: AlwaysEqual(1)), {})
    assert not r.passed and "subclass of int" in r.message

    def stub(ns):
        raise NotImplementedError()
    assert "not implemented" in probe_case(_case(stub), {}).message


def test_a_probe_that_exits_or_interrupts_fails_its_case_and_grading_goes_on():
    """Under nbgrader a probe runs in the kernel: sys.exit() or a KeyboardInterrupt
    raised by the student's code must be a failed case, not the end of grading."""
    def exits(ns):
        raise SystemExit(0)

    def interrupts(ns):
        raise KeyboardInterrupt()
    results = [probe_case(_case(p), {}) for p in (exits, interrupts, lambda ns: [1, {"a": 2.5}])]
    assert [type(r) is Pending for r in results] == [False, False, True]
    assert "sys.exit(0)" in results[0].message and "KeyboardInterrupt" in results[1].message
    assert results[2].got == [1, {"a": 2.5}] and not results[2].passed and results[2].points == 0, \
        "an observation earns nothing until a test judges it"


def test_kernel_harness_reports_partial_credit(capsys, monkeypatch):
    t = Test("labX", "t", "demo", (_case(lambda ns: 1, "ok", 1, visible=True), _case(lambda ns: 1, "bad", 2)))

    def judge(lab, results):          # what the lab's pytest tests would decide
        for r in results:
            for i, c in enumerate(r.cases):
                if type(c) is Pending:
                    ok = c.name == "ok"
                    r.cases[i] = CaseResult(c.name, c.max_points if ok else 0.0, c.max_points, ok, c.visible,
                                            c.fixture, "" if ok else "wrong", None if ok else 2, c.got)
    monkeypatch.setattr("autograder.kernel.get_tests", lambda lab: {"t": t})
    monkeypatch.setattr("autograder.plugin.judge_pending", judge)
    assert grade("labX", "t", {}) == 1.0
    out = capsys.readouterr().out
    assert "PASS ok" in out and "FAIL bad" in out and "expected: 2" in out
    summary = check("labX", "t", {})
    assert summary.all_passed and "1/1 visible" in repr(summary)
    assert run_test(t, {}, visible_only=True).max_score == 1


def test_notebook_read_names_what_is_wrong(tmp_path):
    from autograder.notebook import NotebookError, read
    bad = tmp_path / "list.ipynb"
    bad.write_text("[1, 2, 3]")
    with pytest.raises(NotebookError, match="its JSON is a list, not an object"):
        read(bad)
    old = tmp_path / "v3.ipynb"
    old.write_text('{"nbformat": 3, "worksheets": []}')
    with pytest.raises(NotebookError, match="nbformat=3"):
        read(old)


def test_importing_the_autograder_keeps_jsonschema_from_building_iri_parsers():
    """rfc3987_syntax (optional for jsonschema) costs seconds at import in every grading
    process; the autograder hides it, and notebooks still validate without it."""
    import subprocess
    import sys
    code = ("import sys, autograder, nbformat\n"
            "nb = nbformat.read('solutions/lab00/lab00.ipynb', as_version=4)\n"
            "nbformat.validate(nb)\n"
            "print(sys.modules.get('rfc3987_syntax', 'absent'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert out.stdout.strip() in ("None", "absent"), out.stdout
