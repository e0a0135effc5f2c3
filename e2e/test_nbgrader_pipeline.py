"""The real nbgrader pipeline over every lab, with real CLI commands and kernels.

generate_assignment -> submissions -> autograde -> generate_feedback -> export, run once for
the whole session by the `nbgrader_corpus` fixture (autograder/tests/nbgrader_corpus.py).
Per lab: the unsolved release, in every language edition, must run to the end and score 0
on every graded cell; the
solution must score full marks; feedback HTML must exist; the exported CSV must match the
gradebook.

This is also the one run of each solution notebook top to bottom (autograde executes every
cell of the solved submission, demos and plots included, on the CPU with MPLBACKEND=Agg): no
cell of it may end in an error. Each other language edition of the solution runs too (its
demo cells are the English ones byte for byte, so they are left out): no error, and graded as
the same assignment it scores exactly what the English one does.

The standalone grader (sandboxed children) gives every submission of that run the points
nbgrader gave it, cell by cell. Both tests live in this file so that a parallel run
(pytest-xdist, --dist loadfile) makes the shared nbgrader run once, on one worker.
"""
import csv
import time

import nbformat
import pytest

from autograder.tests.submissions import without_demos, write
from autograder.tests.test_isolation import _compare, _isolated


def _ran_without_errors(lab, nb_path):
    nb = nbformat.read(str(nb_path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        name = cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id", "?"))
        assert cell.execution_count is not None, f"{lab}/{nb_path.name}: cell {name} never ran"
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{lab}/{nb_path.name} cell {name}: {errors[0]['ename']}: {errors[0]['evalue']}"


@pytest.mark.slow
def test_full_nbgrader_pipeline(nbgrader_corpus):
    from nbgrader.api import Gradebook

    run = nbgrader_corpus
    for root, s in run.seconds.items():
        print(f"{root}: autograde {s:.1f} s")
    for lab in run.plan:
        root = run.course_of(lab)
        solved_editions = [s for s in run.plan[lab] if s.startswith("solved")]
        unsolved_editions = [s for s in run.plan[lab] if s.startswith("unsolved")]
        with Gradebook("sqlite:///" + str(root / "course" / "nbgrader" / "gradebook.db")) as gb:
            for student in unsolved_editions + solved_editions:
                submission = gb.find_submission(lab, student)
                graded = [g for nb in submission.notebooks for g in nb.grades if g.max_score]
                assert graded, f"{lab}: no graded cells for {student}"
                for g in graded:
                    if student.startswith("unsolved"):
                        assert g.score == 0, f"{lab}: the release ({student}) earns {g.score} on {g.name}"
                    else:
                        assert g.score == g.max_score, f"{lab}: {student} earns {g.score}/{g.max_score} on {g.name}"
                for nb in submission.notebooks:
                    feedback = root / "course" / "nbgrader" / "feedback" / student / lab / f"{nb.name}.html"
                    assert feedback.is_file() and "<html" in feedback.read_text(encoding="utf-8")[:2000].lower()
            rows = list(csv.DictReader((root / "grades.csv").open()))
            for student in unsolved_editions + solved_editions:
                row = [r for r in rows if r["assignment"] == lab and r["student_id"] == student]
                assert len(row) == 1
                assert float(row[0]["score"]) == pytest.approx(gb.find_submission(lab, student).score)
                if student.startswith("unsolved"):
                    assert float(row[0]["score"]) == 0
                else:
                    assert float(row[0]["score"]) == float(row[0]["max_score"]) > 0
        for student in solved_editions[1:]:
            assert run.scores[lab][student] == run.scores[lab]["solved"], f"{lab}: {student} != solved"
        # the autograded release (every edition) really ran to the end: its last code cell was executed
        for student in unsolved_editions:
            unsolved = run.autograded(lab, student)
            assert unsolved, f"{lab}: no autograded notebook for {student}"
            for nb_path in unsolved:
                nb = nbformat.read(str(nb_path), as_version=4)
                code = [c for c in nb.cells if c.cell_type == "code"]
                assert code[-1].execution_count is not None, f"{lab}: autograde of {student} stopped before the last cell"
        # every edition of the solution ran top to bottom without an error in any cell
        for student in solved_editions:
            solved = run.autograded(lab, student)
            assert solved, f"{lab}: no autograded notebook for {student}"
            for nb_path in solved:
                _ran_without_errors(lab, nb_path)


@pytest.mark.slow
def test_standalone_agrees_with_nbgrader(nbgrader_corpus, tmp_path):
    """Same submissions, two harnesses, the same points for every graded cell. nbgrader's
    verdicts come from the session's one nbgrader run (autograder/tests/nbgrader_corpus.py).
    Also records what nbgrader gives the adversarial `monkeypatch` submission (it replaces
    autograder.kernel.grade in the kernel): see the printed table."""
    t0 = time.monotonic()
    nbg = nbgrader_corpus.scores
    plan = {}
    for lab, subs in nbgrader_corpus.plan.items():
        nbs = {s: p for s, p in subs.items() if not s.startswith(("solved_", "unsolved_"))}   # other editions
        if lab != "lab00":   # demo cells do not change a grade; the standalone run is faster without them
            nbs = {s: (write(without_demos(nbformat.read(str(p), as_version=4)), tmp_path / "lean" / lab / s / p.name)
                       if s in ("solved", "unsolved") else p) for s, p in nbs.items()}
        plan[lab] = nbs
    standalone = {lab: _isolated(lab, nbs, tmp_path / "standalone" / lab, workers=1) for lab, nbs in plan.items()}
    for lab, nbs in plan.items():   # the isolated verdicts are the in-process ones, case by case
        _compare(lab, {s: p for s, p in nbs.items() if not s.startswith("adv_")}, standalone[lab])
    table = []
    for lab, nbs in plan.items():
        for student in nbs:
            mine = {t["name"]: t["score"] for t in standalone[lab][student]["tests"]}
            theirs = nbg[lab][student]
            table.append((lab, student, sum(mine.values()), sum(theirs.values())))
            if student == "adv_monkeypatch":
                assert sum(mine.values()) == 0
                continue
            assert set(theirs) == set(mine), f"{lab}: graded cells {sorted(theirs)} != tests {sorted(mine)}"
            for name in mine:
                assert mine[name] == pytest.approx(theirs[name]), \
                    f"{lab}/{student}/{name}: standalone {mine[name]} != nbgrader {theirs[name]}"
            if student == "adv_eq_cheat":
                assert sum(theirs.values()) == 0, "nbgrader's in-kernel path must not credit the eq-cheat"
    print(f"\nstandalone vs nbgrader ({time.monotonic() - t0:.0f} s):")
    for row in table:
        print("  %-6s %-40s standalone %6g  nbgrader %6g" % row)
