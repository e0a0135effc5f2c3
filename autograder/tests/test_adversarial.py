"""Adversarial submissions cannot raise their score or stop the batch.

The corpus (autograder/tests/adversarial/*.py) is turned into lab00 notebooks (the
release with its solution cell replaced) and graded in ONE standalone batch with short
limits, together with one honest submission that must keep its full marks. Each file's
EXPECT says the most points it may get, what its output must show (proof the attack
really ran) and must never show (proof each attempt failed). The files the parent judges
with, the interpreter's site-packages and the course library are hashed before and after.
The in-kernel (nbgrader) harness is checked too where that is safe in-process: the int
subclass whose == always answers True gets no credit there either.

`make e2e` runs this suite once more as an ordinary user made for the purpose
(e2e/test_adversarial_user.py, `test_the_adversarial_suite_passes_as_an_ordinary_user`), so
both ways of running the grader are covered.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.isolation import Limits, Sandbox
from autograder.tests import adversarial
from autograder.core import get_tests

ROOT = Path(__file__).resolve().parents[2]
SECRET = "AUTOGRADER_TEST_SECRET"
FULL = sum(t.points for t in get_tests("lab00").values())   # lab00's full marks


def _tree_hashes():
    """What lab00 is judged with (other labs' files may change under a shared checkout while
    the batch runs), and every file an attack names as its target (they must never appear)."""
    out = {}
    files = sorted((ROOT / "autograder" / "graders" / "lab00").glob("*.py")) + [
             ROOT / "autograder" / "reference" / "lab00.py",
             ROOT / "autograder" / "core.py", ROOT / "course" / "__init__.py", ROOT / "course" / "fixtures.py"]
    files += sorted((ROOT / "datasets" / "fixtures").glob("*"))
    for p in files:
        if p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    planted = [Path(p) / "l2ft_pwned.pth" for p in site.getsitepackages()]
    planted += [ROOT / "course" / "pwned.py", Path(sys.executable).resolve().parent / "pwned"]
    out["planted"] = sorted(str(p) for p in planted if p.exists())
    return out


LIMITS = Limits(timeout=90, test_timeout=5, case_timeout=2.5, cell_timeout=8, memory=2 << 30,
                output_tail=400_000, max_deaths_per_test=2)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, monkeypatch_module):
    from autograder.batch import discover, grade_batch
    monkeypatch_module.setenv(SECRET, "hunter2-do-not-leak")
    subs = tmp_path_factory.mktemp("adversarial")
    adversarial.build(subs)
    before = _tree_hashes()
    out = tmp_path_factory.mktemp("grades")
    summary = grade_batch(discover([subs], "lab00"), "lab00", out, workers=2, limits=LIMITS, progress=False)
    after = _tree_hashes()
    records = {}
    for p in (out / "students").glob("*.json"):
        rec = json.loads(p.read_text())
        records[rec["student"]] = rec
    return {"summary": summary, "records": records, "before": before, "after": after, "out": out}


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


NAMES = sorted(adversarial.sources())
WEAK = Sandbox.detect().weak


def test_the_corpus_is_not_empty_and_every_file_says_what_it_expects():
    assert len(NAMES) >= 20
    for name, path in adversarial.sources().items():
        exp = adversarial.expectations(path)
        assert "max_score" in exp, name
        assert path.read_text().lstrip().startswith('"""'), f"{name} needs a docstring saying what it tries"


def test_the_batch_survives_every_attack(graded):
    s = graded["summary"]
    assert sorted(s.graded) == NAMES, "every adversarial student got a record"
    assert not s.errors, s.errors
    rows = (graded["out"] / "grades.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_attack_cannot_raise_the_score(graded, name):
    exp = adversarial.expectations(adversarial.sources()[name])
    if exp.get("needs_os") and WEAK:
        pytest.skip("needs the OS sandbox: without it the grader refuses to grade for credit")
    if exp.get("needs_cc") and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("needs a C compiler to build the native attack")
    rec = graded["records"][name]
    assert rec["status"] == "graded", rec["problems"]
    assert rec["score"] <= exp["max_score"], f"{name} earned {rec['score']}: {rec['problems']}"
    if exp.get("full_marks"):
        assert rec["score"] == FULL, f"{name} lost points: {rec['problems']}"
    assert rec["max_score"] == FULL
    assert not WEAK or rec["sandbox"]["weak"]
    out = rec["output_tail"]
    for s in exp.get("output_has", []):
        assert s in out, f"{name}: the attack did not run as planned (no {s!r} in its output)"
    for s in exp.get("output_not", []):
        assert s not in out, f"{name}: {s!r} appeared: an attempt succeeded\n{out[-3000:]}"
    if "problem" in exp:   # a list: any of them (a crash and a timeout are both a 0, whatever the load)
        words = exp["problem"] if isinstance(exp["problem"], list) else [exp["problem"]]
        text = " ".join(rec["problems"]) + " " + " ".join(c["message"] for t in rec["tests"] for c in t["cases"])
        assert any(w.lower() in text.lower() for w in words), f"{name}: no message mentions {words}: {text[:800]}"
    for t in rec["tests"]:
        for c in t["cases"]:
            assert c["passed"] or c["message"], f"{name}: failed case {c['name']} has no message"


def test_no_attack_changed_what_the_parent_judges_with(graded):
    assert graded["before"] == graded["after"]


def test_fake_passed_lines_are_only_text(graded):
    rec = graded["records"]["fake_passed"]
    assert "PASS peaked_distribution" in rec["output_tail"]
    assert all(not c["passed"] for t in rec["tests"] for c in t["cases"])


def test_dead_children_cost_only_the_cases_they_reached(graded):
    for name in ("os_exit", "hang", "thread_exit"):
        rec = graded["records"][name]
        assert rec["restarts"] >= 1, f"{name}: a new child should have been started after a death"
        msgs = [c["message"] for t in rec["tests"] for c in t["cases"]]
        assert all(msgs), msgs
        first = msgs[0]
        assert "exited" in first or "timed out" in first, f"{name}: {first}"


def test_a_correct_function_after_a_top_level_exit_is_graded(tmp_path):
    """sys.exit() at the end of a cell only ends that cell (as in Jupyter): what the
    cell defined before it is kept and earns its points."""
    from autograder.isolation import Runtime, grade_isolated, prepare
    from autograder.tests.submissions import with_solution_code, write
    code = ("import sys\nimport torch\n\ndef greedy_token(logits):\n"
            "    if logits.dim() != 1:\n        raise ValueError(f'`logits` must be 1-D, got {tuple(logits.shape)}')\n"
            "    if torch.isnan(logits).any():\n        raise ValueError('`logits` must not contain NaN')\n"
            "    return int(torch.nonzero(logits == logits.max())[0, 0])\n\nsys.exit(0)\n")
    nb = write(with_solution_code("lab00", {}, first=code), tmp_path / "exit_after.ipynb")
    with Runtime("lab00") as rt:
        g = grade_isolated(prepare(nb, "lab00"), rt, limits=LIMITS)
    assert g.score == FULL, g.problems
    assert any("sys.exit" in p for p in g.problems)


def test_eq_cheat_gets_no_credit_in_the_kernel_harness_either():
    """nbgrader's hidden cells call autograder.kernel.grade in the student's kernel; the
    same probes refuse an int subclass (core.to_plain), so it scores 0 there too."""
    from autograder.core import get_tests, run_test
    from autograder.notebook import namespace
    src = adversarial.sources()["eq_cheat"].read_text()
    ns = namespace(src, "eq_cheat.py")
    for test in get_tests("lab00").values():
        r = run_test(test, ns)
        assert r.score == 0
        assert all("subclass" in c.message for c in r.cases if c.name != "nan_rejected")


def test_forged_messages_never_become_a_grader_error(graded):
    """frame_walk found the channel and wrote `fatal` and `answer` lines with the right
    nonce: the parent judged only its own data, so the run is graded, not a grader error."""
    rec = graded["records"]["frame_walk"]
    assert rec["status"] == "graded" and not any("grader error" in p for p in rec["problems"])


def test_a_daemon_left_by_one_submission_cannot_touch_the_next(tmp_path):
    """Same worker, one after the other: the daemon (setsid, SIGKILLs everything it can for a
    minute) is killed with its child, and the honest submission graded next keeps full marks."""
    if WEAK:
        pytest.skip("needs the OS sandbox")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("needs a C compiler to build the native attack")
    from autograder.isolation import Runtime, grade_isolated, prepare
    built = adversarial.build(tmp_path / "subs")
    with Runtime("lab00") as rt:
        bad = grade_isolated(prepare(built["setsid_daemon"], "lab00"), rt, limits=LIMITS, slot=0)
        good = grade_isolated(prepare(built["honest"], "lab00"), rt, limits=LIMITS, slot=0)
    assert "DAEMON_STARTED" in bad.output and bad.score == 0
    assert good.score == FULL and good.restarts == 0, good.problems


def test_lab_answers_cannot_be_imported_while_that_lab_is_graded(tmp_path):
    """A lab03 notebook whose solution cells import the graded functions from the course
    modules that hold lab03's answers scores no more than the unsolved release."""
    from autograder.isolation import Runtime, grade_isolated, prepare
    from autograder.tests.submissions import release, solution_cells, with_solution_code, write
    names = [n for n in __import__("autograder.graders.lab03", fromlist=["API"]).API]
    code = ("import importlib\n"
            "for _m in ('course.generation', 'course.acceptance'):\n"
            "    try:\n"
            "        _mod = importlib.import_module(_m)\n"
            "        print('LEAK', _m)\n"
            f"        globals().update({{n: getattr(_mod, n) for n in {names!r} if hasattr(_mod, n)}})\n"
            "    except Exception as e:\n"
            "        print('BLOCKED', _m, type(e).__name__)\n")
    every_cell = {c.metadata["nbgrader"]["grade_id"]: code for c in solution_cells(release("lab03"))}
    nb = write(with_solution_code("lab03", every_cell), tmp_path / "lab03.ipynb")
    limits = Limits(timeout=300, test_timeout=60, case_timeout=20)
    with Runtime("lab03") as rt:
        g = grade_isolated(prepare(nb, "lab03"), rt, limits=limits)
        stub = grade_isolated(prepare(ROOT / "labs" / "lab03" / "lab03.ipynb", "lab03"), rt, limits=limits)
    assert "BLOCKED course.generation" in g.output and "LEAK" not in g.output, g.output[-2000:]
    assert g.score <= stub.score, g.problems


def _through_globals(lab: str, tmp_path: Path, roots: list[str]):
    """Grade a notebook whose every solution cell takes the graded functions out of the
    __globals__ of objects the release's setup cell imported (`roots`), and the release.
    What it finds it wraps in functions of its own (which the check on where a graded
    function's code lives lets through) and names in its output: FOUND <name>."""
    import importlib
    from autograder.isolation import Runtime, grade_isolated, prepare
    from autograder.tests.submissions import release, solution_cells, with_solution_code, write
    api = list(importlib.import_module(f"autograder.graders.{lab}").API)
    code = "".join(f"try:\n    _g{i} = {r}.__globals__\nexcept Exception:\n    _g{i} = {{}}\n"
                   for i, r in enumerate(roots))
    code += "".join(f"_f_{n} = " + " or ".join(f"_g{i}.get('{n}')" for i in range(len(roots))) + "\n"
                    f"if _f_{n} is not None:\n    print('FOUND {n}')\n"
                    f"    def {n}(*args, **kwargs):\n        return _f_{n}(*args, **kwargs)\n"
                    for n in api)
    every_cell = {c.metadata["nbgrader"]["grade_id"]: code for c in solution_cells(release(lab))}
    nb = write(with_solution_code(lab, every_cell), tmp_path / f"{lab}.ipynb")
    limits = Limits(timeout=300, test_timeout=60, case_timeout=20)
    with Runtime(lab) as rt:
        return (grade_isolated(prepare(nb, lab), rt, limits=limits),
                grade_isolated(prepare(ROOT / "labs" / lab / f"{lab}.ipynb", lab), rt, limits=limits))


@pytest.mark.slow
def test_lab02_answers_are_not_in_the_childs_memory(tmp_path):
    """course.sampling is never loaded while lab02 is graded: the globals of what the setup
    cell imported (course.generation's generate) do not lead to it."""
    g, stub = _through_globals("lab02", tmp_path, ["generate", "prob_bars"])
    assert "FOUND" not in g.output, g.output[-2000:]
    assert g.score <= stub.score, g.problems


@pytest.mark.slow
def test_lab03_answers_are_not_reachable_through_the_setup_cells_imports(tmp_path):
    """lab03's setup cell imports only course.runs (scaffolding, no answers), and its probes
    never run course.generation or course.acceptance in the child: the globals of what the
    setup cell imported lead to no graded function."""
    g, stub = _through_globals("lab03", tmp_path, ["greedy_sampler", "RecordingExecutor.__init__",
                                                   "InjectedModel.__call__", "GenerationResult.from_dict.__func__"])
    assert "FOUND" not in g.output, g.output[-2000:]
    assert g.score <= stub.score, f"{g.score}/{g.max_score} through __globals__"


def test_the_grader_refuses_weak_isolation_unless_allowed(tmp_path, monkeypatch):
    from autograder.batch import Entry, grade_batch
    from autograder.isolation import WeakIsolation
    monkeypatch.setenv("AUTOGRADER_BWRAP", str(tmp_path / "missing-bwrap"))
    monkeypatch.setenv("AUTOGRADER_CONTAINER_TIER", "off")   # no fallback tier either (as root it would run)
    nb = adversarial.build(tmp_path / "subs")["honest"]
    with pytest.raises(WeakIsolation, match="--allow-weak-isolation"):
        grade_batch([Entry("h", nb)], "lab00", tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out" / "students").exists()
    s = grade_batch([Entry("h", nb)], "lab00", tmp_path / "out", workers=1, progress=False, allow_weak=True)
    rec = json.loads((tmp_path / "out" / "students" / "h.json").read_text())
    assert s.graded == ["h"] and rec["score"] == FULL and rec["sandbox"]["weak"] is True


@pytest.mark.slow
def test_python_level_protection_alone_stops_the_python_attacks(tmp_path, monkeypatch):
    """Without root (a learner's laptop) only the Python-level policy applies: the audit
    hook, the import blocker, the stubbed reference and the namespace snapshots. It must
    stop every attack that does not need a native file reader."""
    from autograder.batch import Entry, grade_batch
    monkeypatch.setenv(SECRET, "hunter2-do-not-leak")
    names = ["read_reference", "overwrite_files", "secrets_env", "kill_parent", "monkeypatch", "fake_passed"]
    built = adversarial.build(tmp_path / "subs")
    before = _tree_hashes()
    out = tmp_path / "out"
    grade_batch([Entry(n, built[n]) for n in names], "lab00", out, workers=2, limits=LIMITS, progress=False,
                sandbox="python", allow_weak=True)
    assert _tree_hashes() == before
    for n in names:
        rec = json.loads((out / "students" / f"{n}.json").read_text())
        assert rec["sandbox"]["weak"] is True and rec["sandbox"]["os_sandbox"] is None
        exp = adversarial.expectations(adversarial.sources()[n])
        assert rec["score"] <= exp["max_score"], (n, rec["problems"])
        for s in exp.get("output_not", []):
            assert s not in rec["output_tail"], f"{n}: {s!r} appeared with Python-level protection only"
        for s in exp.get("output_has", []):
            assert s in rec["output_tail"], n


# ---------------------------------------------------------------- one message cannot hurt the batch

def test_a_result_over_the_limit_fails_its_case_and_its_record_stays_small(graded):
    """huge_result returns 4 MiB (the child refuses to send it and says how large it was);
    huge_raw_write writes 63 MiB past that check (the parent stops reading at the limit).
    Every case they reach fails with the limit in its message, and neither the JSON record
    nor the feedback grows with what was sent."""
    from autograder.isolation import MAX_MESSAGE
    assert MAX_MESSAGE == 1 << 20, "the README states a limit of 1 MiB per message"
    for name, says in (("huge_result", "the result of this case is 4 MiB; the limit is 1 MiB"),
                       ("huge_raw_write", "the result of this case is larger than 1 MiB; the limit is 1 MiB")):
        rec = graded["records"][name]
        msgs = [c["message"] for t in rec["tests"] for c in t["cases"]]
        assert any(says in m for m in msgs), f"{name}: {msgs}"
        # building 63 MiB takes the child's own time: under the corpus's short limits a busy
        # machine may time a case out first, which is its cost, not the parent's
        assert all(says in m or m.startswith(("not run", "timed out")) for m in msgs), f"{name}: {msgs}"
        for p in (graded["out"] / "students" / f"{name}.json", graded["out"] / "feedback" / f"{name}.md"):
            assert p.stat().st_size < 64 * 1024, f"{p.name} is {p.stat().st_size} bytes"


_PARENT_COST = r'''
import json, resource, sys
from pathlib import Path
from autograder.isolation import Limits, Runtime, grade_isolated, prepare
from autograder.tests import adversarial
from autograder.tests.submissions import with_solution_code, write
dest = Path(sys.argv[1])
limits = Limits(timeout=120, test_timeout=30, case_timeout=15, cell_timeout=30, memory=2 << 30,
                max_deaths_per_test=6)
order = ("honest", "honest", "huge_result", "huge_raw_write")
code = {n: adversarial.sources()[n].read_text().replace("SIZE = 4 << 20", "SIZE = 63 << 20") for n in order}
nbs = {n: write(with_solution_code("lab00", {}, first=code[n]), dest / f"{n}.ipynb") for n in set(order)}
out = []
with Runtime("lab00") as rt:
    for name in order:
        before = resource.getrusage(resource.RUSAGE_SELF)
        g = grade_isolated(prepare(nbs[name], "lab00"), rt, limits=limits)
        after = resource.getrusage(resource.RUSAGE_SELF)
        out.append({"name": name, "score": g.score, "maxrss_kib": after.ru_maxrss,
                    "messages": [c.message for t in g.tests for c in t.cases],
                    "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime})
print("COST", json.dumps(out))
'''


def test_a_hostile_message_costs_the_grading_parent_no_more_than_an_honest_submission(tmp_path):
    """A process grades an honest notebook twice (the first also loads the judges), then
    huge_result and huge_raw_write. Its peak resident memory (ru_maxrss, a high-water mark)
    may rise by at most 32 MiB over the honest baseline (measured: 2 MiB; 60 MiB when the
    63 MiB line was read whole and parsed, gigabytes once judges kept it), and the CPU time
    the parent spends on each hostile notebook, which every other worker's submission waits
    on, stays within twice an honest one's plus 0.2 s (measured: 0.005 and 0.02 s against
    0.07 s; 4.5 and 6.7 s before). CPU time, not wall time: the bound holds on a busy machine."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", _PARENT_COST, str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("COST ")]
    assert r.returncode == 0 and lines, r.stdout[-2000:] + r.stderr[-3000:]
    runs = json.loads(lines[-1][5:])
    honest, hostile = runs[1], runs[2:]
    assert honest["score"] == FULL and all(h["score"] == 0 for h in hostile), runs
    assert "the result of this case is 63 MiB; the limit is 1 MiB" in hostile[0]["messages"][0], runs
    for h in hostile:
        grew = (h["maxrss_kib"] - honest["maxrss_kib"]) / 1024
        assert grew < 32, f"{h['name']}: the parent's peak memory rose by {grew:.0f} MiB"
        assert h["cpu_s"] <= 2 * honest["cpu_s"] + 0.2, f"{h['name']}: {runs}"


# ---------------------------------------------------------------- nbgrader's path: what is caught, and where

NBGRADER_TRICKS = {
    # rewrites the hidden test cell before it runs, so neither check() nor grade() is ever called
    "input_transformer_cleanup": "get_ipython().input_transformers_cleanup.append(\n"
                                 "    lambda lines: ['5.0\\n'] if any('grade(' in l for l in lines) else lines)\n",
    "ast_transformer": "import ast\nclass T(ast.NodeTransformer):\n    pass\n"
                       "get_ipython().ast_transformers.append(T())\n",
    "sys_path": "import sys\nsys.path.insert(0, '/tmp/elsewhere')\n",
    "sys_modules": "import sys, types\n"
                   "sys.modules['autograder.kernel'] = types.SimpleNamespace(grade=lambda *a: 5.0, check=print)\n",
    "writes_a_shadow_module": "%%writefile autograder/kernel.py\ndef grade(*args):\n    return 5.0\n",
    "shell_escape": "!mkdir -p autograder && echo 'def grade(*a): return 5.0' > autograder/kernel.py\n",
    "built_string": "exec('get_ipython().' + 'input_transformers_post.append(len)')\n",
    "replaces_grade": "import autograder.kernel\nautograder.kernel.grade = lambda *a: 5.0\n",
    "event_hook": "get_ipython().events.register('pre_run_cell', print)\n",
    "config_magic": "%config InteractiveShell.ast_node_interactivity = 'none'\n",
}


def _submitted(tmp_path: Path, name: str, code: str) -> Path:
    from autograder.tests.submissions import with_solution_code, write
    return write(with_solution_code("lab00", {}, first=code + "\n" + adversarial.sources()["honest"].read_text()),
                 tmp_path / name / "lab00" / "lab00.ipynb")


@pytest.mark.parametrize("name", sorted(NBGRADER_TRICKS))
def test_preflight_reports_code_that_reaches_into_the_kernel(tmp_path, name):
    """Each of these can raise a score under `nbgrader autograde`, where the notebook runs as
    the instructor in an ordinary kernel; preflight names the cell and what it does."""
    from autograder.preflight import check_notebook
    f = check_notebook(_submitted(tmp_path, name, NBGRADER_TRICKS[name]), "lab00")
    tricks = [p for p in f.problems if p.startswith("kernel trick in cell `greedy_token`")]
    assert tricks, f.problems


def test_preflight_reports_a_shadow_grader_beside_the_notebook(tmp_path):
    from autograder.preflight import check_notebook
    nb = _submitted(tmp_path, "mallory", "")
    (nb.parent / "autograder").mkdir()
    (nb.parent / "autograder" / "__init__.py").write_text("")
    (nb.parent / "autograder" / "kernel.py").write_text("def grade(*a):\n    return 5.0\n")
    f = check_notebook(nb, "lab00")
    assert any("autograder would shadow the `autograder` package" in p for p in f.problems), f.problems
    assert not any(p.startswith("kernel trick") for p in f.problems), "the notebook itself is honest"


def test_preflight_finds_no_kernel_tricks_in_the_course_notebooks():
    """No false alarms: every lab's release and solution notebook, in every edition, and the
    honest submission of the adversarial corpus."""
    from autograder.preflight import kernel_tricks, release_cells
    import nbformat
    notebooks = sorted(ROOT.glob("labs/lab[0-9][0-9]/lab*.ipynb")) + sorted(ROOT.glob("labs/zh/lab*/lab*.ipynb")) \
        + sorted(ROOT.glob("solutions/lab[0-9][0-9]/lab*.ipynb"))
    assert len(notebooks) >= 16
    for p in notebooks:
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        assert kernel_tricks(cells, release_cells(p.stem[:5])) == [], p
    from autograder.tests.submissions import with_solution_code
    honest = with_solution_code("lab00", {}, first=adversarial.sources()["honest"].read_text())
    assert kernel_tricks(json.loads(nbformat.writes(honest))["cells"], release_cells("lab00")) == []


def test_grade_refuses_grader_modules_that_are_not_the_installed_ones(monkeypatch, capsys):
    """A notebook that puts its own module into sys.modules under the grader's name (or adds a
    folder to the package's path) gets no points from grade(): KernelTampered, 0 in nbgrader."""
    import types
    from autograder import kernel
    from autograder.notebook import namespace
    ns = namespace(adversarial.sources()["honest"].read_text(), "honest.py")
    assert kernel.grade("lab00", "greedy_token_picks_argmax", ns) > 0
    fake = types.ModuleType("autograder.core_helpers")
    fake.__file__ = "/tmp/submission/autograder/core_helpers.py"
    monkeypatch.setitem(sys.modules, "autograder.core_helpers", fake)
    with pytest.raises(kernel.KernelTampered, match="autograder.core_helpers is not the installed grader's"):
        kernel.grade("lab00", "greedy_token_picks_argmax", ns)


def test_grade_refuses_a_transformer_that_is_not_ipythons(monkeypatch):
    """kernel_tampering looks at what the transformer lists hold, not only at where a
    function was defined: functools.partial(re.sub, ...) is not IPython's own."""
    import functools
    import re
    from autograder import kernel

    import types
    from IPython.core.inputtransformer2 import TransformerManager
    # the attributes kernel_tampering reads, with IPython's own transformers
    shell = types.SimpleNamespace(ast_node_interactivity="last_expr", events=None, CustomTB=None,
                                  input_transformers_post=[], ast_transformers=[], displayhook=sys.displayhook,
                                  input_transformer_manager=TransformerManager(),
                                  display_formatter=types.SimpleNamespace(
                                      format=lambda v: ({"text/plain": repr(v)}, {})))
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    base = kernel.kernel_tampering()
    assert not [t for t in base if "transformer" in t], base
    shell.input_transformer_manager.cleanup_transforms.append(functools.partial(re.sub, "grade", "5.0"))
    assert "an input transformer that is not IPython's own" in kernel.kernel_tampering()
    shell.input_transformer_manager.cleanup_transforms.pop()
    shell.ast_transformers = [re.compile("x")]
    assert "an AST transformer that is not IPython's own" in kernel.kernel_tampering()


KERNEL_CAUGHT = {
    "ast_transformer_not_ipythons": "import ast\nget_ipython().ast_transformers.append(ast.NodeTransformer())\n",
    "input_transformer_not_ipythons": "import functools\n"
                                      "get_ipython().input_transformers_post.append(functools.partial(list))\n",
    "config_magic": "%config InteractiveShell.ast_node_interactivity = 'none'\n",
    "grader_module_in_sys_modules": "import sys, types\n_m = types.ModuleType('autograder.helpers')\n"
                                    "_m.__file__ = '/tmp/x/autograder/helpers.py'\nsys.modules['autograder.helpers'] = _m\n",
}


def _scored_by_nbgrader(tmp_path: Path, before: str | None) -> list[float]:
    """lab00's source notebook (hidden tests in), its solution cell holding the honest
    submission and `before` as a cell ahead of it, run as `nbgrader autograde` runs it
    (errors allowed, NBGRADER_EXECUTION set) and scored with nbgrader's determine_grade."""
    import nbformat
    from nbclient import NotebookClient
    from nbgrader.utils import determine_grade
    nb = nbformat.read(str(ROOT / "solutions" / "lab00" / "lab00.ipynb"), as_version=4)
    cells = []
    for c in nb.cells:
        m = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and m.get("solution"):
            if before is not None:
                cells.append(nbformat.v4.new_code_cell(before))
            c.source = adversarial.sources()["honest"].read_text()
        if c.cell_type == "code" and (m.get("grade") or m.get("solution") or
                                      str(m.get("grade_id", "")).startswith("imports")):
            cells.append(c)
    nb.cells = cells
    env = dict(os.environ, NBGRADER_EXECUTION="autograde")
    old = os.environ.copy()
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return [determine_grade(c)[0] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


@pytest.mark.slow
def test_kernel_tricks_that_grade_catches_in_a_real_kernel(tmp_path):
    """Under nbgrader autograde, a correct submission keeps its points, and the same
    submission after each of these one-cell tricks scores 0 (grade() and check() refuse a
    kernel with a transformer that is not IPython's own or a grader module from elsewhere)."""
    assert _scored_by_nbgrader(tmp_path, None) == [float(FULL)]
    for name, code in KERNEL_CAUGHT.items():
        assert _scored_by_nbgrader(tmp_path, code) == [0], name
