"""The grader plugin (autograder/plugin.py): what a grader test may ask of the student's
process, how pytest's outcome becomes a CaseResult, and that one pytest run judges several
tests of a lab the way a run per test does."""
from __future__ import annotations

import re
import textwrap

import pytest

from autograder import plugin
from autograder.core import CaseResult, Pending, get_tests, run_test, run_tests
from autograder.notebook import extract, namespace, read

GOOD = '''
import pytest
from autograder.core import Fail

pytestmark = pytest.mark.cell("echo_cell", points=2, description="echo returns its input")


@pytest.mark.parametrize("value, hint", [
    pytest.param(3, "Return the number.", id="three", marks=[pytest.mark.probe("echo", 3),
                                                            pytest.mark.cell(visible=True, fixture="f")]),
    pytest.param("a", "Return the text.", id="text", marks=pytest.mark.probe("echo", "a")),
])
def test_echo(observation, value, hint):
    assert observation == value, hint


@pytest.mark.probe("echo", [1, 2])
@pytest.mark.cell(hint="Lists too.")
def test_list_echo(observation):
    if observation != [1, 2]:
        raise Fail("echoed the wrong list", expected=[1, 2], got=observation, hint="Return the list.")
'''


def _run(tmp_path, monkeypatch, source, observations=None):
    lab_dir = tmp_path / "graders" / "lab98"
    lab_dir.mkdir(parents=True, exist_ok=True)
    # a file name of its own: pytest caches a test module by its name
    name = re.sub(r"\W", "_", tmp_path.name)
    (lab_dir / f"test_{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.setitem(plugin._PROBES, "lab98", {"echo": lambda ns, value: value})
    session = plugin.GraderSession(observations)
    args = [str(lab_dir), "-p", "no:cacheprovider", "-p", "no:terminal", "--noconftest", "-o", "addopts=",
            "--import-mode=importlib", "--rootdir", str(tmp_path)]
    pytest.main(args + (["--collect-only"] if observations is None else []), plugins=[session])
    return session


def test_cases_come_from_markers_and_parametrize_ids(tmp_path, monkeypatch):
    session = _run(tmp_path, monkeypatch, GOOD)
    assert not session.problems
    test = session.tests["lab98"]["echo_cell"]
    assert test.description == "echo returns its input" and test.points == 6
    cases = {c.name: c for c in test.cases}
    assert list(cases) == ["three", "text", "list_echo"]
    assert cases["three"].visible and cases["three"].fixture == "f" and not cases["text"].visible
    assert cases["three"].call == ("echo", [3], {}) and cases["list_echo"].hint == "Lists too."


@pytest.mark.parametrize("source, why", [
    ("@pytest.mark.cell('c')\n@pytest.mark.probe('read_the_reference')\ndef test_x(observation): pass",
     "is not a probe"),
    ("@pytest.mark.cell('c')\n@pytest.mark.probe('echo', object())\ndef test_x(observation): pass",
     "plain JSON values"),
    ("@pytest.mark.cell('c')\n@pytest.mark.probe('echo', 1)\ndef test_x(observation, tmp_path): pass",
     "may only use the `observation` fixture"),
    ("@pytest.mark.probe('echo', 1)\ndef test_x(observation): pass", "no @pytest.mark.cell"),
    ("@pytest.mark.cell('c')\ndef test_x(observation): pass", "no @pytest.mark.probe"),
])
def test_a_test_asking_the_child_for_anything_else_fails_to_collect(tmp_path, monkeypatch, source, why):
    session = _run(tmp_path, monkeypatch, "import pytest\n\n" + source + "\n")
    assert any(why in p for p in session.problems), session.problems


def test_outcomes_become_case_results(tmp_path, monkeypatch):
    failed_probe = CaseResult("text", 0.0, 2.0, False, False, None, "your code raised KeyError: 'x'", hint="h")
    session = _run(tmp_path, monkeypatch, GOOD, {("echo_cell", "three"): 4, ("echo_cell", "text"): failed_probe,
                                                 ("echo_cell", "list_echo"): [1, 2]})
    three, text, lst = (session.results[("echo_cell", n)] for n in ("three", "text", "list_echo"))
    assert not three.passed and three.points == 0 and three.max_points == 2 and three.visible
    assert three.hint == "Return the number." and three.got == 4 and three.expected == 3
    assert three.message.startswith("assert 4 == 3")
    assert text is failed_probe, "a probe's own failure is the case's result"
    assert lst.passed and lst.points == 2


def test_only_the_observed_cases_run(tmp_path, monkeypatch):
    session = _run(tmp_path, monkeypatch, GOOD, {("echo_cell", "list_echo"): [2, 1]})
    assert set(session.results) == {("echo_cell", "list_echo")}
    r = session.results[("echo_cell", "list_echo")]
    assert (r.message, r.expected, r.got, r.hint) == ("echoed the wrong list", [1, 2], [2, 1], "Return the list.")


def test_one_pytest_run_for_a_lab_judges_as_one_run_per_test():
    nb = "solutions/lab01/lab01.ipynb"
    ns = namespace(extract(read(plugin.ROOT / nb)).code, nb)
    tests = list(get_tests("lab01").values())
    together = run_tests(tests, ns, visible_only=True)
    alone = [run_test(t, ns, visible_only=True) for t in tests]
    assert [[(c.name, c.passed) for c in r.cases] for r in together] == \
        [[(c.name, c.passed) for c in r.cases] for r in alone]
    assert all(c.passed and type(c) is not Pending for r in together for c in r.cases)


def _imports(source: str) -> set[str]:
    import ast
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            out |= {base} | {f"{base}.{a.name}" if node.module else f"{base}{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("lab", sorted(p.name for p in plugin.GRADERS.glob("lab[0-9][0-9]") if p.is_dir()))
def test_what_the_sandboxed_child_loads_of_a_lab_holds_no_test_and_no_expected_value(lab):
    """The child gets the lab's API and probes (and their private helpers) from the parent's
    staging; none of them is, or imports, a test, a judging helper or the reference."""
    from autograder.isolation.driver import _trusted_sources
    sources = _trusted_sources(lab, plugin.ROOT, [])
    ours = sorted(m for m in sources if m.startswith(f"autograder.graders.{lab}"))
    assert f"autograder.graders.{lab}.probes" in ours
    forbidden = ("autograder.reference", "autograder.plugin", "autograder.variants", "autograder.tests",
                 "judging", "test_", ".reference")
    for module in ours:
        assert not any(f in module.rsplit(".", 1)[-1] or module.startswith(f) for f in forbidden[:4]), module
        leaked = {i for i in _imports(sources[module][0]) if any(f in i for f in forbidden)}
        assert not leaked, f"{module} imports {sorted(leaked)}: the student's process would hold expected values"
    assert not [m for m in sources if m.startswith(("autograder.reference", "autograder.plugin"))]


def test_no_grader_file_is_over_400_lines():
    """A grader a reader can hold in mind: split a long file by exercise, or move shared
    inputs to a private module of the lab (_inputs.py)."""
    long = {str(p.relative_to(plugin.ROOT)): n for p in sorted(plugin.GRADERS.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, long
