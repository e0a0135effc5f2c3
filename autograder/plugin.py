"""Graders written as pytest tests: collection, the observation fixture, the report hook.

A lab in package form (autograder/graders/labNN/) holds

    __init__.py     API (the stub signatures) and the contract-coverage table
    probes.py       functions `name(ns, *plain_args)`: run in the student's process, call the
                    student's code, return plain data; they import no reference
    test_*.py       pytest tests, run in the grading process only:

        @pytest.mark.cell("grade_id", points=1, visible=False, description="...")
        @pytest.mark.probe("probe_name", *plain_args)
        def test_case_name(observation):
            assert observation["result"] == expected, "the hint a student reads"

A case is one test item: its name is the parametrize id (or the function's name without
`test_`); `cell(...)` on the function, its module or a `pytest.param` gives the grade id,
points, visibility, the fixture a report names and the hint shown when the probe itself
fails (the closest one wins); `probe(...)` names the probe and its plain arguments (JSON
values). A test that asks the student's process for anything else (an unknown probe,
arguments that are not plain, a fixture other than `observation`) fails to collect.

Three ways in, one runner:

    get_tests(lab)                  the collected cases as core.Test/Case (points, names)
    judge_pending(lab, results)     pytest judges the observations the harnesses gathered
                                    (core.run_test in a kernel, the sandboxed child's answers)
    pytest autograder/graders/lab00 --submission NB    (or --reference: the solution notebook)

Nothing the student's process sends is trusted: it arrives as plain data, and only the
test functions here, with the reference, decide a verdict.
"""
from __future__ import annotations

import inspect
import json
import os
import threading
from pathlib import Path

import pytest

from .core import STUB_HINT, STUB_MESSAGE, Case, CaseResult, Fail, Pending, Test, describe, is_stub

GRADERS = Path(__file__).resolve().parent / "graders"
ROOT = GRADERS.parents[1]
ALLOWED_FIXTURES = {"observation", "request"}
_LOCK = threading.RLock()          # one pytest session at a time in this process
_TESTS: dict[str, dict[str, Test]] = {}


class ProbeFailed(Exception):
    """The probe did not return an observation; the case's result says why."""

    def __init__(self, result: CaseResult):
        super().__init__(result.message)
        self.result = result


def is_package_lab(lab: str) -> bool:
    return (GRADERS / lab / "__init__.py").is_file()


_PROBES: dict[str, dict] = {}
_FOLDERS: dict[str, Path] = {}               # lab -> its graders' folder, where not GRADERS / lab
_FILES: dict[str, dict[str, set]] = {}       # lab -> grade id -> the test files holding its cases


def _lab_probes(lab: str) -> dict:
    if lab not in _PROBES:
        import importlib
        _PROBES[lab] = probes_of(importlib.import_module(f"autograder.graders.{lab}.probes"))
    return _PROBES[lab]


def probes_of(module) -> dict:
    """The probes of a lab's probes module: its own public functions whose first parameter is `ns`."""
    out = {}
    for name, fn in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != module.__name__:
            continue
        params = list(inspect.signature(fn).parameters)
        if params[:1] == ["ns"]:
            out[name] = fn
    return out


# ---------------------------------------------------------------- what an item says about itself

def _lab_of(item) -> str | None:
    parts = Path(str(item.path)).parts
    if "graders" in parts:
        i = len(parts) - 1 - parts[::-1].index("graders")
        if i + 1 < len(parts) and parts[i + 1].startswith("lab"):
            return parts[i + 1]
    return None


def _cell(item) -> dict:
    """The merged `cell` marks of an item: module and class first, the function's, then a param's."""
    outer = [m for node, m in reversed(list(item.iter_markers_with_node("cell"))) if node is not item]
    marks = outer + [m for m in item.own_markers if m.name == "cell"]
    out: dict = {}
    for m in marks:
        if m.args:
            out["grade_id"] = m.args[0]
        out.update(m.kwargs)
    return out


def _probe(item):
    marks = [m for m in item.own_markers if m.name == "probe"] or list(item.iter_markers("probe"))[:1]
    return marks[-1] if marks else None


def case_name(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        return callspec.id
    return item.originalname.removeprefix("test_")


def _plain(value) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def describe_item(item) -> tuple[str, Case] | str:
    """(grade id, Case) for a grader test, or why it cannot be one."""
    lab = _lab_of(item)
    cell = _cell(item)
    where = item.nodeid
    if lab is None:
        return f"{where}: not inside autograder/graders/labNN/"
    if "grade_id" not in cell:
        return f"{where}: no @pytest.mark.cell(\"grade_id\", points=...)"
    mark = _probe(item)
    if mark is None or not mark.args:
        return f"{where}: no @pytest.mark.probe(\"probe_name\", *args)"
    probes = _lab_probes(lab)
    name, args, kwargs = mark.args[0], list(mark.args[1:]), dict(mark.kwargs)
    if name not in probes:
        return f"{where}: {name!r} is not a probe of autograder/graders/{lab}/probes.py"
    if not _plain(args) or not _plain(kwargs):
        return f"{where}: the arguments of probe {name!r} must be plain JSON values"
    extra = set(item.fixturenames) - ALLOWED_FIXTURES - set(getattr(getattr(item, "callspec", None), "params", {}))
    if extra:
        return f"{where}: a grader test may only use the `observation` fixture, not {sorted(extra)}"
    fn = probes[name]
    case = Case(case_name(item), float(cell.get("points", 1)), lambda ns: fn(ns, *args, **kwargs),
                (name, args, kwargs), visible=bool(cell.get("visible", False)), fixture=cell.get("fixture"),
                hint=cell.get("hint"))
    return str(cell["grade_id"]), case


# ---------------------------------------------------------------- the plugin

class GraderSession:
    """Collects a lab's grader tests; with `observations` ({(grade id, case): plain data or a
    failed CaseResult}) it runs only those and keeps each item's CaseResult in `results`."""

    def __init__(self, observations: dict | None = None):
        self.observations = observations
        self.tests: dict[str, dict[str, Test]] = {}
        self.keys: dict[str, tuple[str, str]] = {}      # nodeid -> (grade id, case)
        self.cases: dict[str, Case] = {}
        self.results: dict[tuple[str, str], CaseResult] = {}
        self.problems: list[str] = []
        self.files: dict[str, dict[str, set]] = {}
        self._compared = None

    def pytest_configure(self, config):
        _markers(config)

    # -- collection
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        keep = []
        for item in items:
            got = describe_item(item)
            if isinstance(got, str):
                self.problems.append(got)
                continue
            grade_id, case = got
            lab = _lab_of(item)
            tests = self.tests.setdefault(lab, {})
            cell = _cell(item)
            test = tests.get(grade_id) or Test(lab, grade_id, str(cell.get("description", "")), ())
            if any(c.name == case.name for c in test.cases):
                self.problems.append(f"{item.nodeid}: case {case.name!r} of {grade_id} is defined twice")
                continue
            tests[grade_id] = Test(test.lab, test.name, test.description or str(cell.get("description", "")),
                                   test.cases + (case,))
            self.keys[item.nodeid] = (grade_id, case.name)
            self.files.setdefault(lab, {}).setdefault(grade_id, set()).add(str(item.path))
            self.cases[item.nodeid] = case
            if self.observations is None or (grade_id, case.name) in self.observations:
                keep.append(item)
        if self.problems:
            raise pytest.UsageError("grader tests that cannot be collected:\n  " + "\n  ".join(self.problems))
        items[:] = keep

    # -- the observation
    @pytest.fixture
    def observation(self, request):
        """What the probe of this case observed in the student's process (plain data)."""
        if self.observations is None:
            pytest.skip("nothing to judge: pass --submission NOTEBOOK (or --reference)")
        got = self.observations.get(self.keys.get(request.node.nodeid))
        if isinstance(got, CaseResult):
            raise ProbeFailed(got)
        return got

    # -- the report
    def pytest_assertrepr_compare(self, op, left, right):
        if op == "==":
            self._compared = (left, right)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        key, case = self.keys.get(item.nodeid), self.cases.get(item.nodeid)
        if case is None or (call.when == "call" and key in self.results):
            return report
        if call.when == "setup" and call.excinfo is None:
            self._compared = None
            return report
        if call.when == "teardown":
            return report
        exc = call.excinfo.value if call.excinfo is not None else None
        self.results[key] = self._verdict(case, exc, report)
        return report

    def _verdict(self, case: Case, exc, report) -> CaseResult:
        # a test may keep what it measured (user_properties "got", plain data, when it passes) and a
        # reason for the instructor to look at the submission ("review", a str, either way)
        props = dict(getattr(report, "user_properties", None) or ())
        review = props.get("review") if isinstance(props.get("review"), str) else None
        if exc is None:
            got = props.get("got")
            return CaseResult(case.name, case.points, case.points, True, case.visible, case.fixture,
                              got=None if got is None else _shown(got), review=review)
        fail = CaseResult(case.name, 0.0, case.points, False, case.visible, case.fixture, hint=case.hint,
                          review=review)
        if isinstance(exc, ProbeFailed):
            return exc.result
        if isinstance(exc, Fail) and _from_stub(exc.got):   # the function is not written yet: no wrong answer
            fail.message = exc.message if STUB_MESSAGE in exc.message else STUB_MESSAGE
            fail.hint = STUB_HINT
        elif isinstance(exc, Fail):
            fail.message, fail.expected, fail.got = exc.message, _shown(exc.expected), _shown(exc.got)
            fail.hint = exc.hint or case.hint
        elif isinstance(exc, AssertionError):
            text = str(exc)
            hint, _, explanation = text.partition("\nassert ")
            if not _ and text.startswith("assert "):
                hint, explanation = "", text[len("assert "):]
            fail.message = ("assert " + explanation.splitlines()[0]) if explanation else "a check failed"
            fail.hint = hint.strip() or case.hint
            if self._compared is not None:
                fail.got, fail.expected = (_shown(v) for v in self._compared)
        else:  # a test that breaks on strange data still gives a verdict
            fail.message = f"the result could not be checked ({type(exc).__name__}: {exc})"
            got = (self.observations or {}).get(self.keys.get(report.nodeid))
            fail.got = describe(got) if not isinstance(got, CaseResult) else None
        self._compared = None
        return fail

    # -- standalone use: pytest autograder/graders/labNN --submission NB
    def pytest_terminal_summary(self, terminalreporter):
        if not self.results:
            return
        tr = terminalreporter
        tr.section("points")
        for lab, tests in self.tests.items():
            for name, test in tests.items():
                got = [self.results[(name, c.name)] for c in test.cases if (name, c.name) in self.results]
                if got:
                    tr.write_line(f"{lab} / {name}: {sum(r.points for r in got):g} of "
                                  f"{sum(r.max_points for r in got):g} points")


def _from_stub(got) -> bool:
    """`got` is what a judge showed of the stub's NotImplementedError (the raised record, or
    its describe() text): the case has nothing to compare, whatever it expected."""
    if isinstance(got, dict):
        return is_stub(got)
    return isinstance(got, str) and (got == "NotImplementedError" or got.startswith("NotImplementedError: "))


def _shown(v):
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return describe(v)


# ---------------------------------------------------------------- running pytest

# pytest's own plugins a judging run does without: each costs start-up time (unraisableexception
# runs gc.collect() twice per session, a second with torch loaded) or touches the process
# (logging handlers, faulthandler's stderr, the cache folder) in a learner's kernel
_OFF = ("cacheprovider", "terminal", "faulthandler", "unraisableexception", "threadexception", "logging",
        "junitxml", "pastebin", "doctest", "stepwise", "tmpdir", "monkeypatch", "recwarn", "legacypath",
        "setuponly", "setupplan", "debugging", "nose", "randomly")


def _args(lab: str, *extra, files=None) -> list[str]:
    off = [a for name in _OFF for a in ("-p", f"no:{name}")]
    return [*(sorted(files) if files else [str(_FOLDERS.get(lab, GRADERS / lab))]), *off, "--noconftest", "--capture=no", "-o", "addopts=",
            "-o", "python_files=test_*.py", "--rootdir", str(ROOT), "-W", "ignore::pytest.PytestAssertRewriteWarning",
            *extra]


def _main(lab: str, session: GraderSession, *extra, files=None) -> None:
    with _LOCK:
        autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"     # no third-party plugins (xdist, hypothesis, ...)
        try:
            code = pytest.main(_args(lab, *extra, files=files), plugins=[session])
        finally:
            if autoload is None:
                os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
            else:
                os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    if session.problems:
        raise RuntimeError("grader tests that cannot be collected:\n  " + "\n  ".join(session.problems))
    if int(code) not in (0, 1, 5):
        raise RuntimeError(f"pytest could not run the graders of {lab} (exit code {int(code)})")


def collect(lab: str, folder: Path | None = None) -> dict[str, Test]:
    """The cases of a package-form lab, by grade id (collected once per process). `folder`:
    where its graders are, when not in autograder/graders (a lab scaffolded elsewhere, whose
    probes module is already in sys.modules as autograder.graders.LAB.probes)."""
    if folder is not None and _FOLDERS.get(lab) != Path(folder):
        _FOLDERS[lab] = Path(folder)
        for cache in (_TESTS, _FILES, _PROBES):
            cache.pop(lab, None)
    if lab not in _TESTS:
        session = GraderSession()
        _main(lab, session, "--collect-only")
        tests = session.tests.get(lab, {})
        _FILES[lab] = session.files.get(lab, {})
        order = _cell_order(lab)
        _TESTS[lab] = dict(sorted(tests.items(), key=lambda kv: order.get(kv[0], len(order))))
    return _TESTS[lab]


def _cell_order(lab: str) -> dict[str, int]:
    """grade id -> position of its graded cell in the lab's release notebook (the order of
    reports, CSV columns and Gradescope tests); tests are collected file by file."""
    nbs = sorted((ROOT / "labs" / lab).glob("*.ipynb"))
    if not nbs:
        return {}
    cells = json.loads(nbs[0].read_text(encoding="utf-8")).get("cells", [])
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells
           if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    return {gid: i for i, gid in enumerate(ids) if gid}


def judge_pending(lab: str, results: list) -> None:
    """Replace every pending CaseResult in `results` (core.TestResult list) with pytest's verdict."""
    observations = {(r.name, c.name): c.got for r in results for c in r.cases if type(c) is Pending}
    if not observations:
        return
    session = GraderSession(observations)
    collect(lab)
    cells = {name for name, _ in observations}
    files = set().union(*(_FILES[lab].get(name, set()) for name in cells)) if cells <= set(_FILES[lab]) else None
    _main(lab, session, files=files)   # only the files that hold these cells: a check of one cell stays quick
    for r in results:
        for i, c in enumerate(r.cases):
            if type(c) is Pending:
                r.cases[i] = session.results.get((r.name, c.name)) or CaseResult(
                    c.name, 0.0, c.max_points, False, c.visible, c.fixture,
                    "grader error: this case was not judged", hint=c.hint)


# ---------------------------------------------------------------- `pytest autograder/graders/labNN`

def pytest_addoption(parser):
    group = parser.getgroup("autograder")
    group.addoption("--submission", default=None, help="grade this notebook (the sandboxed standalone harness)")
    group.addoption("--reference", action="store_true", help="grade the lab's solution notebook (in this process)")
    group.addoption("--reference-observations", default=None, metavar="PATH",
                    help="with --reference: take the solution's observations from PATH when it exists, else "
                         "gather them and write them there (a mutation run: the solution is the same for "
                         "every mutant, only the judges' side changes)")


def _markers(config):
    config.addinivalue_line("markers", "cell(grade_id, points=1, visible=False, description='', fixture=None, "
                                       "hint=None): the graded cell, points and report fields of a grader test")
    config.addinivalue_line("markers", "probe(name, *args): the probe (autograder/graders/labNN/probes.py) "
                                       "whose observation a grader test judges")


def pytest_configure(config):
    _markers(config)
    if not config.pluginmanager.has_plugin("l2ft-grader"):
        config.pluginmanager.register(_CommandLine(config), "l2ft-grader")


class _CommandLine(GraderSession):
    """`--submission`/`--reference`: gather the observations after collection (and -k, --lf)."""

    def __init__(self, config):
        super().__init__(observations={})
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.observations = None
        super().pytest_collection_modifyitems(session, config, items)
        self.observations = {}

    def pytest_collection_finish(self, session):
        if not (self.config.getoption("--submission") or self.config.getoption("--reference")):
            self.observations = None
            return
        by_lab: dict[str, list] = {}
        for item in session.items:
            if item.nodeid in self.keys:
                by_lab.setdefault(_lab_of(item), []).append(self.keys[item.nodeid])
        for lab, keys in by_lab.items():
            wanted = set(keys)
            plan = [Test(t.lab, t.name, t.description, tuple(c for c in t.cases if (t.name, c.name) in wanted))
                    for t in self.tests[lab].values()]
            plan = [t for t in plan if t.cases]
            if self.config.getoption("--reference"):
                results = _reference(lab, plan, self.config.getoption("--reference-observations"))
            else:
                results = _isolated(lab, self.config.getoption("--submission"), plan)
            for r in results:
                for c in r.cases:
                    self.observations[(r.name, c.name)] = c.got if type(c) is Pending else c


def _reference(lab: str, plan: list, saved: str | None) -> list:
    """The solution notebook's observations, gathered in this process; with `saved` (a file
    this function wrote on an earlier run of the same lab) the cases found there are not
    probed again."""
    import pickle
    from .core import TestResult, probe_case
    from .notebook import extract, namespace, read
    known = {}
    if saved and Path(saved).is_file():
        with open(saved, "rb") as f:
            known = pickle.load(f)
    ns = None
    results = []
    for t in plan:
        cases = []
        for c in t.cases:
            if (t.name, c.name) not in known:
                if ns is None:
                    nb = sorted((ROOT / "solutions" / lab).glob("*.ipynb"))[0]
                    ns = namespace(extract(read(nb)).code, str(nb))
                known[(t.name, c.name)] = probe_case(c, ns)
            cases.append(known[(t.name, c.name)])
        results.append(TestResult(t.lab, t.name, t.description, cases))
    if saved and ns is not None:
        with open(saved, "wb") as f:
            pickle.dump(known, f)
    return results


def _isolated(lab: str, path: str, plan: list) -> list:
    from .isolation import Runtime, grade_isolated, prepare
    sub = prepare(Path(path), lab)
    with Runtime(lab) as runtime:
        graded = grade_isolated(sub, runtime, tests=plan, judge=False)
    for p in graded.problems:
        print(f"note: {p}")
    return graded.tests
