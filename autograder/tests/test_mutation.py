"""`make mutation`'s pieces that decide what counts: which mutants are scored, what a
test run's exit means to mutmut, and how survivors are triaged (no mutants are run here)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mutmut import Context, list_mutations

from autograder import mutation

ROOT = Path(mutation.__file__).resolve().parents[1]


def _mutants(module: str) -> list:
    source = (ROOT / mutation.module_file(module)).read_text(encoding="utf-8")
    return source, list(list_mutations(Context(source=source, filename=mutation.module_file(module))))


def test_only_scope_functions_of_a_course_module_are_scored():
    source, mids = _mutants("course.generation")
    scope = mutation.scope_lines("course.generation", source)
    outside = [mid for mid in mids if mid.line_number + 1 not in scope]
    inside = [mid for mid in mids if mid.line_number + 1 in scope]
    assert outside and inside, "TextStream's mutants are not lab03's to catch; generate's are"
    assert {mutation.skip_reason("course.generation", source, mid) for mid in outside} == {"out of scope"}
    assert mutation.skip_reason("course.generation", source, inside[0]) is None


def test_a_reference_without_scope_is_scored_whole():
    source, mids = _mutants("autograder.reference.lab00")
    assert mids and mutation.scope_lines("autograder.reference.lab00", source) is None
    assert [mutation.skip_reason("autograder.reference.lab00", source, mid) for mid in mids] == [None] * len(mids)


def test_every_target_is_a_file_and_every_scope_name_is_defined():
    for lab, modules in mutation.TARGETS.items():
        for module in modules:
            path = ROOT / mutation.module_file(module)
            assert path.is_file(), f"{lab}: {module} is not {path}"
            if module in mutation.SCOPE:
                lines = mutation.scope_lines(module, path.read_text(encoding="utf-8"))
                defined = {n.name for n in __import__("ast").parse(path.read_text(encoding="utf-8")).body
                           if hasattr(n, "name")}
                assert set(mutation.SCOPE[module]) <= defined and lines


def test_a_run_that_cannot_even_collect_counts_as_a_kill(tmp_path):
    # mutmut reads only exit code 1 as a failing test run; a mutant that breaks an import
    # ends pytest with 2, which the plugin turns into 1 (and names in the log)
    (tmp_path / "test_broken.py").write_text("raise RuntimeError('planted')\n", encoding="utf-8")
    log = tmp_path / "log.jsonl"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           mutation.LOG_ENV: str(log), mutation.MUTANT_ENV: "m:1:0"}
    done = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider",
                           "-p", "autograder.mutation", "--rootdir", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    import json
    [entry] = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert (entry["mutant"], entry["exit"], entry["failed"]) == ("m:1:0", 2, "collecting test_broken.py")


def test_message_text_and_listed_equivalents_are_triaged_and_nothing_else():
    assert mutation.equivalence("autograder.reference.lab01",
                                ['-    raise ValueError(f"`x` must be > 0, got {x}.")',
                                 '+    raise ValueError(f"XX`x` must be > 0, got {x}.XX")']) is not None
    assert mutation.equivalence("autograder.reference.lab01",
                                ["-    best_t, best_p = None, -1.0", "+    best_t, best_p = None, -2.0"]) is not None
    assert mutation.equivalence("autograder.reference.lab01",
                                ["-    if p > best_p:", "+    if p >= best_p:"]) is None


def test_the_runner_is_the_labs_pytest_graders_on_the_reference():
    cmd = mutation.runner("lab01", "python")
    assert "python autograder/mutation_fork.py run" in cmd
    assert "-- autograder/graders/lab01 --reference -x" in cmd
    assert "--timeout" in cmd and "-p pytest_timeout" in cmd and "-p autograder.mutation" in cmd
    assert f"--reference-observations {mutation.OBSERVATIONS}" in cmd
    assert set(mutation.runnable()) <= set(mutation.TARGETS)


def _env(**extra) -> dict:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "OMP_NUM_THREADS": "1", **extra}


def test_the_fork_server_runs_pytest_with_the_callers_folder_environment_and_exit_code(tmp_path):
    sock = tmp_path / "s.sock"
    (tmp_path / "test_env.py").write_text(
        "import os, time\n"
        "def test_env():\n    assert os.environ['WANT'] == 'yes', os.environ.get('WANT')\n"
        "def test_slow():\n    if os.environ.get('SLOW'):\n        time.sleep(60)\n", encoding="utf-8")
    server = subprocess.Popen([sys.executable, str(ROOT / "autograder" / "mutation_fork.py"), "serve", str(sock),
                               "pytest"], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert server.stdout.readline().strip() == "ready"
        client = [sys.executable, str(ROOT / "autograder" / "mutation_fork.py"), "run", str(sock), "--",
                  "-q", "-p", "no:cacheprovider", "test_env.py"]
        ok = subprocess.run(client, cwd=tmp_path, env=_env(WANT="yes"), capture_output=True, text=True)
        assert ok.returncode == 0 and "2 passed" in ok.stdout, ok.stdout + ok.stderr
        bad = subprocess.run(client, cwd=tmp_path, env=_env(WANT="no"), capture_output=True, text=True)
        assert bad.returncode == 1 and "1 failed" in bad.stdout, bad.stdout + bad.stderr
        # mutmut's time limit kills the client: the server kills that pytest and serves the next
        hung = subprocess.Popen(client + ["-k", "slow"], cwd=tmp_path, env=_env(WANT="yes", SLOW="1"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        children = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 1
        hung.kill()
        hung.wait()
        for _ in range(50):
            if not subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split():
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the hung pytest outlived its client")
        again = subprocess.run(client, cwd=tmp_path, env=_env(WANT="yes"), capture_output=True, text=True)
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        server.kill()
        server.wait()


def test_a_mutant_is_judged_on_the_observations_the_pre_pass_saved(tmp_path):
    # A planted wrong observation in the saved file: a mutant's run judges the saved
    # observations (and fails here, as the solution itself would not).
    import pickle
    saved = tmp_path / "obs.pkl"
    args = [sys.executable, "-m", "pytest", "autograder/graders/lab00", "--reference", "-q", "-p", "no:cacheprovider",
            "-p", "autograder.mutation", "--reference-observations", str(saved)]
    first = subprocess.run(args, cwd=ROOT, env=_env(**{mutation.PREPASS_ENV: "1"}), capture_output=True, text=True)
    assert first.returncode == 0 and saved.is_file(), first.stdout + first.stderr
    obs = pickle.loads(saved.read_bytes())
    key = next(k for k, v in obs.items() if isinstance(getattr(v, "got", None), dict)
               and type(v.got.get("result")) is int)
    obs[key].got = {**obs[key].got, "result": obs[key].got["result"] + 1}
    saved.write_bytes(pickle.dumps(obs))
    cached = subprocess.run(args, cwd=ROOT, env=_env(**{mutation.MUTANT_ENV: "m:1:0"}), capture_output=True, text=True)
    assert cached.returncode == 1 and "1 failed" in cached.stdout, cached.stdout


def test_only_the_pre_pass_and_a_mutants_run_use_the_saved_observations(monkeypatch):
    from types import SimpleNamespace

    def option_after(**env):
        for name in (mutation.PREPASS_ENV, mutation.MUTANT_ENV):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        config = SimpleNamespace(option=SimpleNamespace(reference_observations="obs.pkl"))
        mutation.pytest_configure(config)
        return config.option.reference_observations

    assert option_after(**{mutation.PREPASS_ENV: "1"}) == "obs.pkl"          # the pre-pass writes them
    assert option_after(**{mutation.MUTANT_ENV: "m:1:0"}) == "obs.pkl"       # a mutant is judged on them
    assert option_after() is None                            # mutmut's timing run probes the solution


def test_a_hand_triaged_mutant_is_read_before_the_message_text_rule(monkeypatch):
    # a string mutation on a line that mentions "name" looks like message text to the rule, but a
    # reading recorded in GAPS (or EQUIVALENT) decides; a dropped decorator gets a key of its own
    diff = ['-    events = [{"name": "process_name", "ph": "M"}]', '+    events = [{"name": "XXprocess_nameXX", "ph": "M"}]']
    assert mutation.equivalence("m", diff) is not None                       # the rule alone
    key = mutation._key("m", diff)
    monkeypatch.setitem(mutation.GAPS, key, "a case would read the event's name")
    assert mutation.equivalence("m", diff) is None
    monkeypatch.delitem(mutation.GAPS, key)
    monkeypatch.setitem(mutation.EQUIVALENT, key, "no judge reads it")
    assert mutation.equivalence("m", diff) == "no judge reads it"
    assert mutation._key("m", ["-@lru_cache(maxsize=1)"]) == ("m", "deleted: @lru_cache(maxsize=1)")


def test_a_recheck_projects_the_full_runs_kills_plus_the_survivors_it_killed(monkeypatch):
    """--recheck's projection: the full run's kills, the survivors the recheck killed, the
    equivalents as the triage reads them now; what still survives is counted as surviving."""
    rows = [{"module": "m", "diff": ["-a", "+b"], "killed_by": "test_x"},
            {"module": "m", "diff": ["-c", "+d"], "killed_by": None},
            {"module": "m", "diff": ["-e", "+f"], "killed_by": None},
            {"module": "m", "diff": ["-g", "+h"], "killed_by": None}]
    monkeypatch.setattr(mutation, "equivalence", lambda module, diff: "read" if diff == ["-g", "+h"] else None)
    out = {"killed": [{"module": "m", "diff": ["-c", "+d"]}], "survived": [{"module": "m", "diff": ["-e", "+f"]}]}
    pr = mutation.projection({"mutants_detail": rows, "seconds": 1.0}, out)["projection"]
    assert (pr["mutants"], pr["killed"], pr["equivalent"], pr["survived"]) == (4, 2, 1, 1)
    assert pr["score"] == round(2 / 3, 4) and pr["raw_score"] == 0.5


def test_scope_exclude_drops_a_methods_lines_and_its_decorator_only(monkeypatch):
    source = ("class Pool:\n"
              "    def kept(self):\n"
              "        return 1\n"
              "\n"
              "    @classmethod\n"
              "    def left_out(cls):\n"
              "        return 2\n"
              "\n"
              "\n"
              "def helper():\n"
              "    return 3\n")
    monkeypatch.setitem(mutation.SCOPE, "m", ("Pool",))
    monkeypatch.setitem(mutation.SCOPE_EXCLUDE, "m", ("Pool.left_out",))
    assert mutation.scope_lines("m", source) == {1, 2, 3, 4}
