"""Learner mode: the work folder, honest Validate, the self-check, and an in-kernel grade()
that neither punishes stderr nor rewards kernel tricks."""
import copy
import os
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader.utils import determine_grade

from autograder import kernel
from autograder.core import Case, CaseResult, Pending
from autograder.core import Test as GraderTest
from autograder.notebook import extract, namespace, read
from course import lab_server
from notebooks import ROOT

REFERENCE_LAB00 = (ROOT / "autograder" / "reference" / "lab00.py").read_text()
BUG_TIE = (ROOT / "autograder" / "variants" / "lab00" / "bug_tie_highest_id.py").read_text()
STUB_LAB00 = "def greedy_token(logits):\n    raise NotImplementedError()\n"


# ---------------------------------------------------------------- the work folder

def _lab(folder, name, text="{}"):
    (folder / name).mkdir(parents=True)
    (folder / name / f"{name}.ipynb").write_text(text)


def test_sync_work_copies_each_lab_once_and_never_overwrites(tmp_path):
    labs, work = tmp_path / "labs", tmp_path / "work"
    _lab(labs, "lab00", "release 0")
    _lab(labs, "lab01", "release 1")
    assert sorted(lab_server.sync_work(labs, work)) == ["lab00/lab00.ipynb", "lab01/lab01.ipynb"]
    (work / "lab00" / "lab00.ipynb").write_text("my answers")
    (work / "lab00" / "scratch.ipynb").write_text("my notes")
    (labs / "lab00" / "lab00.ipynb").write_text("release 0, regenerated")
    _lab(labs, "lab02", "release 2")                          # a lab that appears later
    (labs / "lab01" / "data.json").write_text("new file")      # a file added to a lab later
    assert sorted(lab_server.sync_work(labs, work)) == ["lab01/data.json", "lab02/lab02.ipynb"]
    assert (work / "lab00" / "lab00.ipynb").read_text() == "my answers"
    assert (work / "lab00" / "scratch.ipynb").read_text() == "my notes"
    assert (work / "lab02" / "lab02.ipynb").read_text() == "release 2"
    assert lab_server.sync_work(labs, work) == []
    _lab(labs / "zh", "lab00", "zh release 0")                # an edition in another language
    assert lab_server.sync_work(labs, work) == ["zh/lab00/lab00.ipynb"]


def test_sync_work_skips_checkpoints_and_caches(tmp_path):
    labs = tmp_path / "labs"
    _lab(labs, "lab00")
    (labs / "lab00" / ".ipynb_checkpoints").mkdir()
    (labs / "lab00" / ".ipynb_checkpoints" / "lab00-checkpoint.ipynb").write_text("{}")
    assert lab_server.sync_work(labs, tmp_path / "work") == ["lab00/lab00.ipynb"]


def test_work_folder_is_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "-q", "work/lab01/lab01.ipynb"], cwd=ROOT)
    assert out.returncode == 0, "work/ must be git-ignored: it holds the learner's own notebooks"


@pytest.mark.slow
def test_release_leaves_the_learners_notebook_intact(tmp_path, monkeypatch):
    """`make release` regenerates labs/ with nbgrader; the learner's edited copy in work/
    (and a notebook of their own beside it) must come through untouched, and the next
    `make lab` must not overwrite them either."""
    from autograder import release
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    for name in ("nbgrader_config.py",):
        (course / name).write_bytes((ROOT / name).read_bytes())
    import shutil
    shutil.copytree(ROOT / "solutions" / "lab00", course / "solutions" / "lab00")
    shutil.copytree(ROOT / "labs" / "lab00", course / "labs" / "lab00")
    work = course / "work"
    lab_server.sync_work(course / "labs", work)
    mine = work / "lab00" / "lab00.ipynb"
    nb = nbformat.read(str(mine), as_version=4)
    nb.cells[5].source = "def greedy_token(logits):\n    return 0  # my attempt\n"
    nbformat.write(nb, str(mine))
    (work / "lab00" / "notes.ipynb").write_text("{}")
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    (course / "labs" / "lab00" / "lab00.ipynb").write_text("stale release")
    monkeypatch.setattr(release, "ROOT", course)
    assert release.main(["lab00"]) == 0
    assert "stale release" not in (course / "labs" / "lab00" / "lab00.ipynb").read_text()  # it did run
    copied = lab_server.sync_work(course / "labs", work)
    # only editions the learner did not have yet (the Chinese one the release built) come in
    assert not [c for c in copied if c.startswith("lab00/")], copied
    after = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before} == before


# ---------------------------------------------------------------- learner vs instructor server

def test_learner_mode_turns_nbgrader_interface_off_and_instructor_mode_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_server, "CONFIG", tmp_path / "cfg")
    cmd, env = lab_server.command(port=0, token="t", browser=False, mode="learner")
    assert f"--ServerApp.root_dir={lab_server.WORK}" in cmd
    config = env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0]
    import json
    page = json.loads((tmp_path / "cfg" / "labconfig" / "page_config.json").read_text())
    server = json.loads((tmp_path / "cfg" / "jupyter_server_config.json").read_text())
    assert config == str(tmp_path / "cfg") and page["disabledExtensions"] == {"@jupyter/nbgrader": True}
    assert set(server["ServerApp"]["jpserver_extensions"]) == set(lab_server.NBGRADER_SERVER_EXTENSIONS)
    assert not any(server["ServerApp"]["jpserver_extensions"].values())
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    cmd, env = lab_server.command(port=0, mode="instructor")
    assert f"--ServerApp.root_dir={lab_server.ROOT}" in cmd and "JUPYTER_CONFIG_PATH" not in env
    with pytest.raises(ValueError, match="`mode` must be one of learner, instructor, got 'teacher'"):
        lab_server.command(mode="teacher")


# ---------------------------------------------------------------- self-check and check/grade in-process

def _ns(path):
    return namespace(extract(read(path)).code)


def test_self_check_reports_a_stub_as_failing_and_a_solution_as_passing(capsys):
    stub = kernel.self_check("lab01", _ns(ROOT / "labs" / "lab01" / "lab01.ipynb"))
    out = capsys.readouterr().out
    assert stub.passed == 0 and stub.total > 0 and not stub.all_passed
    n = len(stub.checks)
    assert f"[1/{n}] FAIL" in out and f"[{n}/{n}] FAIL" in out and "What to fix" in out
    assert "still failing" in out and "not implemented yet" in out
    solved = kernel.self_check("lab00", _ns(ROOT / "solutions" / "lab00" / "lab00.ipynb"))
    out = capsys.readouterr().out
    assert solved.all_passed and solved.passed == solved.total > 0
    assert "[1/1] PASS" in out and "What to fix" not in out
    with pytest.raises(ValueError, match="`lab` must be one of"):
        kernel.self_check("lab99", {})
    kernel.self_check("lab00", {})        # cells not run yet: says so instead of blaming the name
    assert "Not defined in this kernel yet: greedy_token. Run their cells first" in capsys.readouterr().out


def _case(name, points, probe=lambda ns: 1, **kw):
    return Case(name, points, probe, ("p", [], {}), **kw)


def _judged_by_name(monkeypatch):
    """Stand in for a lab's pytest tests: a case named ok... passes, any other fails."""
    def judge(lab, results):
        for r in results:
            for i, c in enumerate(r.cases):
                if type(c) is Pending:
                    ok = c.name.startswith("ok")
                    r.cases[i] = CaseResult(c.name, c.max_points if ok else 0.0, c.max_points, ok, c.visible,
                                            c.fixture, "" if ok else "no")
    monkeypatch.setattr("autograder.plugin.judge_pending", judge)


def _noisy_test(monkeypatch):
    def probe(ns):
        import logging
        logging.getLogger("student").info("computing")
        os.write(2, b"raw fd 2 write\n")
        print("to sys.stderr", file=sys.stderr)
        return 1
    t = GraderTest("labX", "t", "demo", (_case("ok", 2, probe, visible=True), _case("bad", 1)))
    monkeypatch.setattr("autograder.kernel.get_tests", lambda lab: {"t": t})
    _judged_by_name(monkeypatch)


def test_grade_captures_stderr_from_logging_sys_stderr_and_fd_2(capfd, monkeypatch):
    import logging
    _noisy_test(monkeypatch)
    handler = logging.StreamHandler(sys.stderr)       # what logging.basicConfig installs
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        assert kernel.grade("labX", "t", {}) == 2.0
        kernel.check("labX", "t", {})
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    out, err = capfd.readouterr()
    assert err == "", f"stderr leaked: {err!r}"
    assert "PASS ok" in out
    os.write(2, b"after\n")                           # fd 2 is restored afterwards
    assert capfd.readouterr().err == "after\n"


def test_check_raises_under_validate_only(monkeypatch, capsys):
    t = GraderTest("labX", "t", "demo", (_case("bad", 1, visible=True),))
    monkeypatch.setattr("autograder.kernel.get_tests", lambda lab: {"t": t})
    _judged_by_name(monkeypatch)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert kernel.check("labX", "t", {}).passed == 0       # a learner's Run All goes on
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with pytest.raises(kernel.VisibleChecksFailed, match="0/1 visible checks passed"):
        kernel.check("labX", "t", {})


def test_grade_raises_when_a_test_earns_nothing(monkeypatch, capsys):
    t = GraderTest("labX", "t", "demo", (_case("bad", 3),))
    monkeypatch.setattr("autograder.kernel.get_tests", lambda lab: {"t": t})
    _judged_by_name(monkeypatch)
    with pytest.raises(kernel.NoPoints, match="t: 0 of 3 points"):
        kernel.grade("labX", "t", {})
    assert "FAIL bad" in capsys.readouterr().out


# ---------------------------------------------------------------- a real kernel, scored as nbgrader scores

def _graded_notebook(solution_src: str, before: str | None = None):
    """lab00's source notebook (hidden tests in) without demo cells, with `solution_src` in
    its solution cell and `before` as an extra cell before it."""
    nb = nbformat.read(str(ROOT / "solutions" / "lab00" / "lab00.ipynb"), as_version=4)
    keep = []
    for c in nb.cells:
        m = c.metadata.get("nbgrader", {})
        if c.cell_type != "code" or m.get("grade") or m.get("solution") or str(m.get("grade_id", "")).startswith("imports"):
            keep.append(c)
    nb.cells = keep
    for i, c in enumerate(nb.cells):
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = solution_src
            if before is not None:
                nb.cells.insert(i, nbformat.v4.new_code_cell(before))
            break
    return nb


def _nbgrader_scores(nb, tmp_path, execution="autograde"):
    """Execute like nbgrader's autograde (errors allowed, NBGRADER_EXECUTION set) and score
    every grade cell with nbgrader's own determine_grade."""
    nb = copy.deepcopy(nb)
    env_before = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = execution
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if env_before is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = env_before
    return [determine_grade(c)[0] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


HONEST_NOISY = {
    "logging_info": "import logging\nlogging.basicConfig(level=logging.INFO)\n" + REFERENCE_LAB00.replace(
        "    best = logits.max()", "    logging.info('picking the greedy token')\n    best = logits.max()"),
    "os_write_fd2": "import os\n" + REFERENCE_LAB00.replace(
        "    best = logits.max()", "    os.write(2, b'debug: picking\\n')\n    best = logits.max()"),
}

TRICKS = {
    "ast_node_interactivity": 'get_ipython().ast_node_interactivity = "none"',
    "display_formatter": ("get_ipython().display_formatter.formatters['text/plain']"
                          ".for_type(float, lambda x, p, cycle: p.text('5.0'))"),
    "pre_run_cell_hook": "get_ipython().events.register('pre_run_cell', lambda info: None)",
    "input_transformer": ("get_ipython().input_transformers_post.append("
                          "lambda lines: [l.replace('grade(', '5.0 or grade(') for l in lines])"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HONEST_NOISY))
def test_honest_code_that_writes_to_stderr_keeps_its_points_in_the_kernel(name, tmp_path):
    assert _nbgrader_scores(_graded_notebook(HONEST_NOISY[name]), tmp_path) == [5.0]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRICKS))
def test_kernel_tricks_do_not_raise_a_partial_score(name, tmp_path):
    """bug_tie_highest_id earns part of the points; each one-line trick used to turn that
    into full marks under nbgrader. Now the cell scores 0 (and the stub stays at 0)."""
    honest = _nbgrader_scores(_graded_notebook(BUG_TIE), tmp_path)
    assert 0 < honest[0] < 5
    assert _nbgrader_scores(_graded_notebook(BUG_TIE, TRICKS[name]), tmp_path) == [0]
    assert _nbgrader_scores(_graded_notebook(STUB_LAB00, TRICKS[name]), tmp_path) == [0]


# ---------------------------------------------------------------- nbgrader validate, as the Validate button runs it

def _validate(path, cwd):
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]})
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_validate_fails_a_stub_and_passes_a_solved_lab(tmp_path):
    import shutil
    for folder in ("labs", "solutions"):
        shutil.copytree(ROOT / folder / "lab00", tmp_path / folder / "lab00")
    stub = _validate(tmp_path / "labs" / "lab00" / "lab00.ipynb", tmp_path)
    assert "VALIDATION FAILED" in stub and "Success" not in stub, stub[-2000:]
    assert "VisibleChecksFailed" in stub
    # a learner's solved copy: the release with the solution cell filled in
    solved = nbformat.read(str(tmp_path / "labs" / "lab00" / "lab00.ipynb"), as_version=4)
    for c in solved.cells:
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = REFERENCE_LAB00
    nbformat.write(solved, str(tmp_path / "labs" / "lab00" / "solved.ipynb"))
    out = _validate(tmp_path / "labs" / "lab00" / "solved.ipynb", tmp_path)
    assert "Success! Your notebook passes all the tests." in out, out[-2000:]


# ---------------------------------------------------------------- `python -m autograder check` from where the learner is

def test_check_names_every_path_it_looked_for(tmp_path, capsys):
    from autograder.cli import main
    from autograder.selfcheck import WORK
    missing = tmp_path / "nowhere" / "lab01.ipynb"
    assert main(["check", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no notebook at {missing}" in err and str(WORK) in err


def test_a_bare_lab_name_and_a_folder_mean_the_notebook_in_it(tmp_path):
    from autograder.selfcheck import WORK, candidates, resolve_notebook
    assert WORK / "lab03" / "lab03.ipynb" in candidates("lab03", cwd=tmp_path)
    (tmp_path / "lab03").mkdir()
    (tmp_path / "lab03" / "lab03.ipynb").write_text("{}")
    assert resolve_notebook("lab03", cwd=tmp_path) == (tmp_path / "lab03" / "lab03.ipynb").resolve()
    assert resolve_notebook("lab03/", cwd=tmp_path) == (tmp_path / "lab03" / "lab03.ipynb").resolve()


@pytest.mark.slow
def test_check_runs_from_the_work_folder_with_progress(tmp_path):
    """The command the notebook prints for JupyterLab's terminal, which opens in work/."""
    import shutil
    shutil.copytree(ROOT / "labs" / "lab00", tmp_path / "lab00")
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", "lab00/lab00.ipynb"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr          # the stub fails its visible checks
    assert f"Checking {(tmp_path / 'lab00' / 'lab00.ipynb').resolve()} (lab00)" in proc.stderr
    assert "done in" in proc.stderr
    assert "lab00: 0/" in proc.stdout and "not a file" not in proc.stdout
