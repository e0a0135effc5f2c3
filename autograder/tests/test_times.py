"""`python -m autograder times`: minutes per exercise from JupyterLab's cell timing, on
lab07's release with hand-written `metadata.execution` times; and the hub's opt-in switch
that makes JupyterLab record them (off unless the instructor turns it on)."""
from __future__ import annotations

import copy
import csv
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder import times
from autograder.cli import main

ROOT = Path(__file__).resolve().parents[2]
HUB = ROOT / "hub"
RELEASE = json.loads((ROOT / "labs" / "lab07" / "lab07.ipynb").read_text(encoding="utf-8"))
T0 = datetime(2027, 3, 1, 9, 0, tzinfo=timezone.utc)
EXERCISES = ["check_admission", "schedule", "run_batch", "advance", "finish", "abort_request", "replay_in_engine"]


def iso(minutes: float) -> str:
    """As the kernel writes a message date: ISO with microseconds and Z."""
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def code_cells(nb, where: str) -> list[int]:
    """Indices of the code cells of `where`: "setup" or an exercise's grade_id (its solution
    cell first, then the code cells after it up to the next exercise)."""
    sol = [k for k, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("solution")]
    if where == "setup":
        span = range(0, sol[0])
    else:
        k = next(k for k in sol if nb["cells"][k]["metadata"]["nbgrader"]["grade_id"] == where)
        span = range(k, min([s for s in sol if s > k], default=len(nb["cells"])))
    return [k for k in span if nb["cells"][k]["cell_type"] == "code"]


def ran(nb, where: str, minutes: float, nth: int = 0, seconds: float = 0.0):
    """The latest run of the nth code cell of `where`: received at `minutes`, answered
    `seconds` later (the keys JupyterLab's recordTiming writes)."""
    cell = nb["cells"][code_cells(nb, where)[nth]]
    cell["metadata"]["execution"] = {
        "iopub.status.busy": iso(minutes), "iopub.execute_input": iso(minutes),
        "shell.execute_reply.started": iso(minutes),
        "shell.execute_reply": iso(minutes + seconds / 60), "iopub.status.idle": iso(minutes + seconds / 60)}


def notebook(runs) -> dict:
    nb = copy.deepcopy(RELEASE)
    for r in runs:
        ran(nb, *r)
    return nb


# Hand-checked minutes (runs are instantaneous, so the finishes are the minutes written).
ADA = notebook([("setup", 1), ("check_admission", 8), ("check_admission", 11, 1),   # solution, then its check
                ("schedule", 20), ("schedule", 26),             # run twice: the second run replaces the first
                ("run_batch", 46), ("advance", 51), ("finish", 61), ("abort_request", 91), ("replay_in_engine", 106)])
ADA_MIN = [10, 15, 20, 5, 10, 30, 15]                          # total 105
BOB = notebook([("setup", 1), ("check_admission", 11), ("schedule", 21), ("run_batch", 41), ("advance", 51),
                ("finish", 61), ("abort_request", 131), ("abort_request", 141, 1),   # lunch: 61 -> 131 not counted
                ("replay_in_engine", 151)])
BOB_MIN = [10, 10, 20, 10, 10, 10, 10]                         # total 80
EVE = notebook([("setup", 1), ("schedule", 21), ("check_admission", 31),   # schedule done before check_admission
                ("run_batch", 41), ("advance", 51), ("finish", 61), ("abort_request", 71), ("replay_in_engine", 81)])
EVE_MIN = [10, 20, 10, 10, 10, 10, 10]                         # total 80
CAROL = copy.deepcopy(RELEASE)                                  # no timing at all


def dan() -> dict:
    """Ran everything at the end: every code cell 2 seconds after the one before."""
    nb = copy.deepcopy(RELEASE)
    for n, k in enumerate(k for k, c in enumerate(nb["cells"]) if c["cell_type"] == "code"):
        nb["cells"][k]["metadata"]["execution"] = {"iopub.execute_input": iso(200 + 2 * n / 60),
                                                   "shell.execute_reply": iso(200 + (2 * n + 1) / 60)}
    return nb


def test_release_has_the_exercises_the_notebooks_are_built_on():
    assert times.exercises("lab07") == EXERCISES


@pytest.mark.parametrize("nb, expected", [(ADA, ADA_MIN), (BOB, BOB_MIN), (EVE, EVE_MIN)], ids=["ada", "bob", "eve"])
def test_minutes_per_exercise_by_hand(nb, expected):
    s = times.estimate(nb, EXERCISES, "x")
    assert s.status == "ok"
    assert [round(s.minutes[i], 6) for i in EXERCISES] == expected
    assert round(s.total, 6) == sum(expected)


def test_no_timing_and_run_all_at_the_end_give_no_data():
    assert times.estimate(CAROL, EXERCISES).status == "no timing"
    d = times.estimate(dan(), EXERCISES)
    assert d.status == "swept" and all(v is None for v in d.minutes.values()) and d.total is None


def test_setup_only_is_left_out_as_no_exercise_measured():
    s = times.estimate(notebook([("setup", 1)]), EXERCISES)
    assert s.status == "no exercise measured" and s.why["schedule"] == "not run"


def test_a_restart_sweeps_the_earlier_exercises_only():
    """Restart at 60 and re-run everything above (2 s apart), then 15 minutes on run_batch:
    the swept exercises have no finish of their own; run_batch is measured from the sweep."""
    nb = notebook([("setup", 60), ("check_admission", 60 + 2 / 60), ("schedule", 60 + 4 / 60),
                   ("run_batch", 75 + 4 / 60)])
    s = times.estimate(nb, EXERCISES)
    assert s.status == "ok" and s.why["check_admission"] == s.why["schedule"] == "swept"
    assert round(s.minutes["run_batch"], 6) == 15 and s.minutes["advance"] is None and s.total is None


def test_an_interval_that_is_all_pause_has_no_data():
    nb = notebook([("setup", 1), ("check_admission", 11), ("schedule", 61)])   # 50 minutes, no run between
    s = times.estimate(nb, EXERCISES)
    assert s.minutes["check_admission"] == 10 and s.minutes["schedule"] is None and s.why["schedule"] == "pause"
    assert times.estimate(nb, EXERCISES, pause_minutes=60).minutes["schedule"] == 50


def test_quantile_is_linear_between_sorted_values():
    assert times.quantile([20, 10, 15], 0.5) == 15
    assert times.quantile([10, 15, 20], 0.75) == 17.5 and times.quantile([10, 15, 20], 0.9) == 19
    assert times.quantile([7], 0.9) == 7


def write_class(folder: Path, layout: str = "nbgrader"):
    class_ = {"ada": ADA, "bob": BOB, "carol": CAROL, "dan": dan(), "eve": EVE}
    for student, nb in class_.items():
        path = folder / student / "lab07" / "lab07.ipynb" if layout == "nbgrader" else folder / f"{student}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb), encoding="utf-8")


@pytest.mark.parametrize("layout", ["nbgrader", "plain"])
def test_cli_writes_the_class_table_and_csv(tmp_path, capsys, layout):
    """ada, bob and eve counted; carol (no timing) and dan (ran all at the end) left out.
    schedule: 15, 10, 20 -> median 15, P75 17.5, P90 19; abort_request 30, 10, 10 -> 10, 20, 26;
    total 105, 80, 80 -> median 80, P75 92.5, P90 100; 92.5 rounded up to 15 min is 105."""
    write_class(tmp_path / "submitted", layout)
    assert main(["times", "--lab", "lab07", "--notebooks", str(tmp_path / "submitted")]) == 0
    rows = {r["exercise"]: r for r in csv.DictReader((tmp_path / "times-lab07.csv").open())}
    assert list(rows) == EXERCISES + ["total"]
    got = lambda name: [rows[name][k] for k in ("students", "median", "p75", "p90")]   # noqa: E731
    assert got("check_admission") == ["3", "10", "10", "10"]
    assert got("schedule") == ["3", "15", "17.5", "19"]
    assert got("advance") == ["3", "10", "10", "10"]
    assert got("abort_request") == ["3", "10", "20", "26"]
    assert got("replay_in_engine") == ["3", "10", "12.5", "14"]
    assert got("total") == ["3", "80", "92.5", "100"]
    md = (tmp_path / "times-lab07.md").read_text()
    assert "| schedule | 3 | 15 | 17.5 | 19 |" in md
    assert "5 notebooks read; left out: 1 without timing, 1 with every exercise re-run back to back" in md
    assert "syllabus time = P75 of the total, rounded up to 15 min = 105 minutes" in md and "suggestion" in md
    assert md in capsys.readouterr().out


def test_cli_out_folder(tmp_path):
    write_class(tmp_path / "submitted")
    assert main(["times", "--lab", "lab07", "--notebooks", str(tmp_path / "submitted"),
                 "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "times-lab07.csv").is_file() and not (tmp_path / "times-lab07.csv").exists()


def test_cli_errors_name_the_parameter_and_value(tmp_path, capsys):
    def error(*argv):
        assert main(["times", *argv]) == 2
        return capsys.readouterr().err

    write_class(tmp_path / "class")
    assert "`--lab` must be one of lab00" in error("--lab", "lab99", "--notebooks", str(tmp_path / "class"))
    assert "got 'lab99'" in error("--lab", "lab99", "--notebooks", str(tmp_path / "class"))
    missing = str(tmp_path / "nowhere")
    assert f"`--notebooks` must be a folder of submitted notebooks, got {missing!r}." in \
        error("--lab", "lab07", "--notebooks", missing)
    (tmp_path / "empty").mkdir()
    assert f"`--notebooks` {str(tmp_path / 'empty')!r} holds no .ipynb files." in \
        error("--lab", "lab07", "--notebooks", str(tmp_path / "empty"))
    (tmp_path / "untimed" / "carol").mkdir(parents=True)
    (tmp_path / "untimed" / "carol" / "lab07.ipynb").write_text(json.dumps(CAROL))
    err = error("--lab", "lab07", "--notebooks", str(tmp_path / "untimed"))
    assert f"no notebook under `--notebooks` {str(tmp_path / 'untimed')!r} has cell timing" in err
    assert "timing switch" in err
    assert "`--pause-minutes` must be > 0, got 0." in error("--lab", "lab07", "--notebooks", str(tmp_path / "class"),
                                                         "--pause-minutes", "0")


# --- the hub's switch ----------------------------------------------------------------

SETTING = "@jupyterlab/notebook-extension:tracker"


def test_switch_file_sets_jupyterlabs_own_setting():
    """The override's plugin id and key are JupyterLab's (a renamed one would record nothing)."""
    override = json.loads((HUB / "jupyter" / "timing" / "labconfig" / "default_setting_overrides.json").read_text())
    assert override == {SETTING: {"recordTiming": True}}
    schema = json.loads((Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" /
                         "notebook-extension" / "tracker.json").read_text())
    assert schema["properties"]["recordTiming"]["type"] == "boolean"
    assert schema["properties"]["recordTiming"]["default"] is False


def spawn_env(monkeypatch, tmp_path, switch: str | None, user: str) -> dict:
    """Load hub/jupyterhub_config.py as the hub does and run its pre-spawn hook for `user`."""
    from traitlets.config import Config
    monkeypatch.setenv("LTFT_HUB_ROSTER", str(HUB / "roster.example.csv"))
    monkeypatch.setenv("LTFT_HUB_STATE", str(tmp_path / "state"))
    if switch is None:
        monkeypatch.delenv("LTFT_HUB_RECORD_TIMING", raising=False)
    else:
        monkeypatch.setenv("LTFT_HUB_RECORD_TIMING", switch)
    config = Config()
    path = HUB / "jupyterhub_config.py"
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: config, "__file__": str(path)})
    spawner = SimpleNamespace(user=SimpleNamespace(name=user), environment={}, notebook_dir=None)
    config.Spawner.pre_spawn_hook(spawner)
    return spawner.environment


def lab_overrides(monkeypatch, config_path: str) -> dict:
    """The setting defaults JupyterLab's server would send with this JUPYTER_CONFIG_PATH."""
    from jupyterlab_server.settings_utils import _get_overrides
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", config_path)
    overrides, error = _get_overrides(str(Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"))
    assert not error
    return overrides


def test_hub_records_no_timing_by_default(monkeypatch, tmp_path):
    for user in ("ada", "khan"):   # a student, an instructor (roster.example.csv)
        env = spawn_env(monkeypatch, tmp_path, None, user)
        assert "timing" not in env["JUPYTER_CONFIG_PATH"]
        assert lab_overrides(monkeypatch, env["JUPYTER_CONFIG_PATH"]).get(SETTING, {}).get("recordTiming") is not True
    env = spawn_env(monkeypatch, tmp_path, "0", "ada")
    assert lab_overrides(monkeypatch, env["JUPYTER_CONFIG_PATH"]).get(SETTING, {}).get("recordTiming") is not True


def test_hub_switch_on_records_for_students_only(monkeypatch, tmp_path):
    student = spawn_env(monkeypatch, tmp_path, "1", "ada")["JUPYTER_CONFIG_PATH"]
    assert lab_overrides(monkeypatch, student)[SETTING]["recordTiming"] is True
    assert str(HUB / "jupyter" / "student") in student.split(":"), "the students' other settings stay"
    instructor = spawn_env(monkeypatch, tmp_path, "1", "khan")["JUPYTER_CONFIG_PATH"]
    assert lab_overrides(monkeypatch, instructor).get(SETTING, {}).get("recordTiming") is not True


def test_hub_switch_value_is_checked(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match=r"`LTFT_HUB_RECORD_TIMING` must be 0 or 1, got 'yes'\."):
        spawn_env(monkeypatch, tmp_path, "yes", "ada")


def test_helm_switch_is_off_by_default():
    import yaml
    values = yaml.safe_load((HUB / "helm" / "values.yaml").read_text())
    assert values["custom"]["ltft"]["recordTiming"] is False
    code = values["hub"]["extraConfig"]["ltft"]
    assert 'get_config("custom.ltft.recordTiming", False) is True' in code
    assert "student_config_path(COURSE, RECORD_TIMING)" in code
