"""One real nbgrader run that several slow tests read: every lab, every kind of submission.

    run = graded_corpus(workdir)          # the session fixture `nbgrader_corpus` calls this once
    run.scores["lab03"]["solved"]         # {grade cell id: points} from nbgrader's gradebook
    run.course_of("lab03")                # the scratch course root that graded lab03

Per lab the submissions are:
  unsolved       the release as a student receives it (must score 0 and run to its end)
  unsolved_<lang>  the release of each other language edition (the same)
  solved         the solution notebook with its demos (the one full run of every solution)
  solved_<lang>  the same solution in each language edition (translated text and docstrings;
                 without the demo cells, which are the English ones byte for byte)
  bug_* / correct_* / adv_*   what tests/test_isolation compares with the standalone grader:
                 every variant and two adversarial notebooks for lab00, one bug elsewhere
                 (without demo cells, which do not change a grade)

nbgrader's start-up costs more than a small notebook, so the labs are split between two
scratch courses (one per core) and each course runs generate_assignment, autograde,
generate_feedback and export once for all its labs.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


from autograder import editions
from autograder.release import nbgrader_env, release_dir
from autograder.tests import adversarial
from autograder.tests.submissions import from_variant, solution, with_solution_code, without_demos, write

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ROOT / "autograder" / "variants"
# a rough cost of one notebook, to split the labs evenly between the two courses
HEAVY = {"solved": 4, "unsolved": 2}


def labs_with_notebooks() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]")
                  if list(p.glob("*.ipynb")) and list((ROOT / "labs" / p.name).glob("*.ipynb")))


def editions_of(lab: str) -> list[str]:
    return [lang for lang in editions.LANGUAGES if editions.translation_path(lab, lang).is_file()]


def plan_for(lab: str, folder: Path) -> dict[str, Path]:
    """student -> notebook path for one lab (written under `folder` where built)."""
    rel = sorted((ROOT / "labs" / lab).glob("*.ipynb"))[0]
    out = {"unsolved": rel, "solved": solution(lab)}
    for lang in editions_of(lab):
        out[f"unsolved_{lang}"] = sorted(release_dir(lab, lang).glob("*.ipynb"))[0]
    for lang in editions_of(lab):   # demo cells are the English ones byte for byte (tests/test_i18n.py)
        out[f"solved_{lang}"] = write(without_demos(editions.edition(lab, lang)),
                                      folder / f"solved_{lang}" / f"{lab}.ipynb")
    files = sorted(p for p in (VARIANTS / lab).glob("*.py") if p.name.startswith(("bug_", "correct_")))
    chosen = files if lab == "lab00" else [p for p in files if p.name.startswith("bug_")][:1]
    for p in chosen:
        out[p.stem] = write(without_demos(from_variant(lab, p)), folder / p.stem / f"{lab}.ipynb")
    if lab == "lab00":
        for name in ("eq_cheat", "monkeypatch"):
            src = adversarial.sources()[name].read_text()
            out[f"adv_{name}"] = write(with_solution_code("lab00", {}, first=src),
                                       folder / f"adv_{name}" / f"{lab}.ipynb")
    return out


@dataclass
class CorpusRun:
    plan: dict                       # lab -> {student: submitted notebook path}
    courses: dict                    # lab -> scratch course root
    scores: dict = field(default_factory=dict)   # lab -> student -> {grade cell id: points}
    seconds: dict = field(default_factory=dict)  # course root -> autograde seconds

    def course_of(self, lab: str) -> Path:
        return self.courses[lab]

    def autograded(self, lab: str, student: str) -> list[Path]:
        return sorted((self.courses[lab] / "course" / "nbgrader" / "autograded" / student / lab).glob("*.ipynb"))


def _run_course(root: Path, labs: list[str], plan: dict, timeout: float) -> float:
    import time
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    for lab in labs:
        shutil.copytree(ROOT / "solutions" / lab, root / "solutions" / lab, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        name = solution(lab).name
        for student, path in plan[lab].items():
            dest = root / "course" / "nbgrader" / "submitted" / student / lab / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
    py, pattern = sys.executable, "lab[0-9][0-9]"
    steps = [["generate_assignment", pattern, "--force"], ["autograde", pattern, "--force"],
             ["generate_feedback", pattern, "--force"], ["export", "--to", str(root / "grades.csv")]]
    env = dict(nbgrader_env(), MPLBACKEND="Agg")   # the kernels inherit it: plots draw without a display
    seconds = 0.0
    for step in steps:
        start = time.perf_counter()
        proc = subprocess.run([py, "-m", "nbgrader", *step], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader {step[0]} failed for {labs}:\n{proc.stdout[-4000:]}")
        if step[0] == "autograde":
            seconds = time.perf_counter() - start
    return seconds


def graded_corpus(workdir: Path, *, labs: list[str] | None = None, timeout: float = 1800) -> CorpusRun:
    """Build the submissions of every lab and grade them with the real nbgrader CLI."""
    from nbgrader.api import Gradebook

    workdir = Path(workdir)
    labs = labs or labs_with_notebooks()
    plan = {lab: plan_for(lab, workdir / "subs" / lab) for lab in labs}
    halves: list[list[str]] = [[], []]
    cost = lambda lab: sum(HEAVY.get(s, 1) for s in plan[lab])  # noqa: E731
    for lab in sorted(labs, key=lambda lab: -cost(lab)):
        min(halves, key=lambda h: sum(cost(x) for x in h)).append(lab)
    roots = [workdir / f"course{i}" for i in range(2)]
    courses = {lab: roots[i] for i, h in enumerate(halves) for lab in h}
    run = CorpusRun(plan, courses)
    jobs = [(roots[i], h) for i, h in enumerate(halves) if h]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for (root, _), seconds in zip(jobs, pool.map(lambda j: _run_course(j[0], j[1], plan, timeout), jobs)):
            run.seconds[str(root)] = seconds
    for lab in labs:
        with Gradebook("sqlite:///" + str(courses[lab] / "course" / "nbgrader" / "gradebook.db")) as gb:
            for student in plan[lab]:
                sub = gb.find_submission(lab, student)
                run.scores.setdefault(lab, {})[student] = {g.name: float(g.score) for nb in sub.notebooks
                                                           for g in nb.grades}
    return run
