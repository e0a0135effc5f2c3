"""lab07's performance figures: the same on every run, carried into the record and the class
CSV, and ranked by `python -m autograder leaderboard` from a graded folder."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from autograder import cli, get_tests, leaderboard, reports, run_test

ROOT = Path(__file__).resolve().parents[2]
REF = {"makespan": 0.93, "ttft_mean": 0.14, "ttft_p95": 0.27, "tpot_p95": 0.038}


def _figures(makespan, ttft_p95, **kw):
    f = {"makespan": makespan, "ttft_mean": ttft_p95 / 2, "ttft_p95": ttft_p95, "tpot_p95": 0.04, **kw}
    return {**f, **{f"reference_{k}": v for k, v in REF.items()}}


def _case(name, passed, got=None, message=""):
    return {"name": name, "points": 2.0 if passed else 0.0, "max_points": 2.0, "passed": passed, "visible": False,
            "fixture": None, "message": message, "expected": None, "got": got, "hint": None}


def _record(student, cases, lab="lab07", score=None):
    score = sum(c["points"] for c in cases) if score is None else score
    return {"schema": reports.SCHEMA, "harness": "standalone", "student": student, "lab": lab, "file": f"{student}.ipynb",
            "submission_sha256": "0" * 64, "grader_version": "test", "graded_at": "2026-01-01T00:00:00+00:00",
            "status": "graded", "score": score, "max_score": 4.0, "problems": [],
            "tests": [{"lab": lab, "name": "engine_runs_each_request_as_if_alone", "description": "", "score": score,
                       "max_score": 4.0, "cases": cases}],
            "output_tail": "", "restarts": 0, "seconds": 1.0, "sandbox": "test", "limits": None, "language": None}


def _graded_folder(tmp_path, records):
    for rec in records:
        reports.write_atomic(reports.student_paths(tmp_path, rec["student"])["json"], json.dumps(rec))
    return tmp_path


def _class(tmp_path):
    slow = _figures(1.2, 0.45)
    return _graded_folder(tmp_path, [
        _record("bob", [_case("makespan_within_margin_of_the_reference", False, slow, "too slow"),
                        _case("p95_ttft_within_margin_of_the_reference", False, slow, "too slow")]),
        _record("ada", [_case("makespan_within_margin_of_the_reference", True, _figures(0.93, 0.27)),
                        _case("p95_ttft_within_margin_of_the_reference", True, _figures(0.93, 0.27))]),
        _record("cy", [_case("makespan_within_margin_of_the_reference", False, {"tokens": [1, 2]}, "tokens differ"),
                       _case("p95_ttft_within_margin_of_the_reference", False, None, "tokens differ")]),
        _record("dan", [_case("makespan_within_margin_of_the_reference", True, _figures(0.88, 0.30)),
                        _case("p95_ttft_within_margin_of_the_reference", True, _figures(0.88, 0.30))]),
        _record("eve", [_case("makespan_within_margin_of_the_reference", True, _figures(0.5, 0.1))], lab="lab05"),
    ])


def test_leaderboard_writes_a_ranked_table_and_a_png(tmp_path, capsys):
    folder = _class(tmp_path)
    assert cli.main(["leaderboard", "--lab", "lab07", "--grades", str(folder)]) == 0
    assert "3 of 4 students timed" in capsys.readouterr().out
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    assert [(r["rank"], r["student"]) for r in rows] == [("1", "dan"), ("2", "ada"), ("3", "bob"), ("", "cy")]
    assert float(rows[0]["makespan"]) == 0.88 and float(rows[2]["makespan_vs_reference"]) == pytest.approx(1.2 / 0.93,
                                                                                                             abs=1e-4)
    assert rows[3]["makespan"] == "" and rows[1]["score"] == "4"
    md = (folder / "leaderboard.md").read_text()
    assert md.index("| 1 | dan |") < md.index("| 2 | ada |") < md.index("| 3 | bob |") < md.index("|  | cy |")
    assert "Reference engine: makespan 0.9300" in md and "| eve |" not in md
    assert (folder / "leaderboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_leaderboard_anonymous_and_the_batch_csv(tmp_path):
    folder = _class(tmp_path)
    # the batch's grades.csv lists the students it signed: a record outside it is not ranked
    (folder / "grades.csv").write_text("student_id,lab,score\nada,lab07,4\nbob,lab07,0\n")
    assert cli.main(["leaderboard", "--lab", "lab07", "--grades", str(folder), "--anonymous"]) == 0
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    assert [(r["rank"], r["student"], r["makespan"]) for r in rows] == [("1", "student 1", "0.9300"),
                                                                       ("2", "student 2", "1.2000")]


def test_leaderboard_refuses_a_folder_that_was_not_graded(tmp_path, capsys):
    assert cli.main(["leaderboard", "--lab", "lab07", "--grades", str(tmp_path)]) == 2
    assert "`--grades` must be a folder" in capsys.readouterr().err
    assert cli.main(["leaderboard", "--lab", "lab99", "--grades", str(tmp_path)]) == 2


def test_class_csv_has_figure_columns_only_when_a_record_has_figures(tmp_path):
    recs = reports.load_records(_class(tmp_path))
    lab07 = [r for r in recs.values() if r["lab"] == "lab07"]
    rows = list(csv.DictReader(reports.class_csv(lab07, ["engine_runs_each_request_as_if_alone"]).splitlines()))
    by = {r["student_id"]: r for r in rows}
    assert by["dan"]["makespan"] == "0.880000" and by["bob"]["ttft_p95"] == "0.450000" and by["cy"]["makespan"] == ""
    plain = _record("zoe", [_case("x", True)])
    header = reports.class_csv([plain], ["engine_runs_each_request_as_if_alone"]).splitlines()[0]
    assert header.endswith(",file") and "makespan" not in header


def _namespace(variant=None):
    from autograder.notebook import extract, namespace, read
    if variant is None:
        nb = ROOT / "solutions" / "lab07" / "lab07.ipynb"
        return namespace(extract(read(nb)).code, str(nb))
    from autograder.tests.submissions import from_variant
    path = ROOT / "autograder" / "variants" / "lab07" / variant
    return namespace(extract(from_variant("lab07", path)).code, str(path))


def test_the_performance_figures_are_the_same_on_every_run_and_reach_the_record():
    from autograder.graders.lab07 import probes
    from autograder.graders.lab07 import performance as perf
    ns = _namespace()
    first, second = probes.workload(ns), probes.workload(ns)
    assert first == second
    want = perf.reference_figures()
    assert perf.figures(first) == perf.figures(second) == want
    assert want["makespan"] > 0 and want["ttft_p95"] > 0
    # through the grader, as a batch records it: each performance case keeps the figures as `got`
    result = run_test(get_tests("lab07")["engine_runs_each_request_as_if_alone"], ns)
    cases = {c.name: c for c in result.cases}
    for name in ("makespan_within_margin_of_the_reference", "p95_ttft_within_margin_of_the_reference"):
        assert cases[name].passed and leaderboard.figures({"tests": [{"cases": [vars(cases[name])]}]}) == {
            **want, **{f"reference_{k}": v for k, v in want.items()}}
    # a slower correct design ranks behind the reference, with the same figures on every run
    slow = _namespace("bug_caps_prefill_tokens_per_step.py")
    a, b = perf.figures(probes.workload(slow)), perf.figures(probes.workload(slow))
    assert a == b and a["makespan"] > perf.MAKESPAN_MARGIN * want["makespan"] and \
        a["ttft_p95"] > perf.TTFT_MARGIN * want["ttft_p95"]


def test_two_correct_designs_get_different_figures_ranked_by_the_figure_asked(tmp_path):
    """The reference (first come, first served) and a bypass that lets small requests fill the
    free blocks (correct_bounded_bypass.py, within the workload's max_overtakes) both earn the
    performance points; the bypass gets its first tokens out sooner and finishes later, and the
    leaderboard ranks them by whichever figure the instructor names."""
    from autograder.graders.lab07 import probes
    from autograder.graders.lab07 import performance as perf
    ref = perf.reference_figures()
    bypass = perf.figures(probes.workload(_namespace("correct_bounded_bypass.py")))
    assert bypass == perf.figures(probes.workload(_namespace("correct_bounded_bypass.py")))
    assert bypass["ttft_mean"] < ref["ttft_mean"] and bypass["ttft_p95"] < ref["ttft_p95"]
    assert ref["makespan"] < bypass["makespan"] <= perf.MAKESPAN_MARGIN * ref["makespan"]

    def figs(f):
        return {**f, **{f"reference_{k}": v for k, v in ref.items()}}
    folder = _graded_folder(tmp_path, [
        _record(name, [_case("makespan_within_margin_of_the_reference", True, figs(f)),
                       _case("p95_ttft_within_margin_of_the_reference", True, figs(f))])
        for name, f in (("fcfs", ref), ("bypass", bypass))])
    assert [r["student"] for r in leaderboard.rows(folder, "lab07")[0]] == ["fcfs", "bypass"]
    for by in ("ttft_p95", "ttft_mean"):
        assert [r["student"] for r in leaderboard.rows(folder, "lab07", by=by)[0]] == ["bypass", "fcfs"]
    assert cli.main(["leaderboard", "--lab", "lab07", "--grades", str(folder), "--by", "ttft_p95"]) == 0
    assert "ranked by ttft_p95" in (folder / "leaderboard.md").read_text()
    assert cli.main(["leaderboard", "--lab", "lab07", "--grades", str(folder), "--by", "speed"]) == 2
    with pytest.raises(ValueError, match="`by` must be one of"):
        leaderboard.rows(folder, "lab07", by="speed")


def test_the_judge_times_only_what_the_log_and_the_workload_allow():
    import copy

    from autograder.core import Fail
    from autograder.graders.lab07 import performance as perf
    good = perf.reference_run()

    def forged(change, consistent_clock=True):
        """The judge's message for the reference's run with `change` made to it (and the clock
        after each forward recomputed from the changed log, as a careful forger would)."""
        obs = copy.deepcopy(good)
        change(obs)
        if consistent_clock:
            obs["times"] = perf._clock(obs)[0]
        with pytest.raises(Fail) as e:
            perf.figures(obs)
        return e.value.message

    assert "clock does not match" in forged(lambda o: o["times"].__setitem__(-1, o["times"][-1] - 0.1), False)
    assert "no arrival" in forged(lambda o: o["events"].insert(0, ["idle", 3, -0.05]), False)
    assert "abort the workload does not make" in forged(lambda o: o["events"].insert(0, ["abort", 0, "w01"]), False)
    assert "more than max_batch" in forged(lambda o: o["log"][0].extend([[f"w{n}", 0, 5] for n in range(24, 32)]))
    assert "disagree on whether it was aborted" in forged(lambda o: o["requests"]["w00"].__setitem__("aborted", True))
    last = good["log"][-1][0][0]                  # a request in the last forward: its last token loses its row
    assert f"request {last!r}: token" in forged(lambda o: o["log"][-1].pop(0))


def _forged_run():
    """What a fake engine reports: the reference's run with two tokens of a request in one forward
    (each request's decode forwards 2, 4, ... moved into the forward before, as a second row, where
    max_batch and the pool leave room), the empty forwards removed and the clock recomputed from
    the log, as a careful forger would."""
    import copy

    from autograder.graders.lab07 import performance as perf
    obs = copy.deepcopy(perf.reference_run())
    cfg = perf.WORKLOAD["config"]

    def blocks(call):
        return sum(-(-(c + n) // cfg["block_size"]) for _, c, n in call)
    seen, log, where, count = {}, [], {}, [0]        # count[n]: forwards left of the first n logged
    for call in obs["log"]:
        kept = []
        for name, cached, new in call:
            k = seen[name] = seen.get(name, -1) + 1
            host = where.pop(name, None)
            row = [name, cached, new]
            if k >= 2 and k % 2 == 0 and host is not None and len(host) < cfg["max_batch"] \
                    and blocks(host + [row]) <= cfg["num_blocks"]:
                host.append(row)                 # token k made in the forward that made token k - 1
                continue
            kept.append(row)
            if k % 2 == 1:
                where[name] = kept
        if kept:
            log.append(kept)
        count.append(len(log))
    obs["log"], obs["events"] = log, [[kind, count[n], what] for kind, n, what in obs["events"]]
    obs["times"] = perf._clock(obs)[0]
    return obs


def test_the_judge_refuses_forward_passes_no_engine_could_run():
    import copy

    from autograder.graders.lab07 import performance as perf
    good = perf.reference_run()

    def forged(change):
        obs = copy.deepcopy(good)
        change(obs)
        obs["times"] = perf._clock(obs)[0]
        with pytest.raises(perf.ImpossibleLog) as e:
            perf.figures(obs)
        return e.value.message

    def rows(obs, name):
        return [(i, r) for i, call in enumerate(obs["log"]) for r in call if r[0] == name]

    def two_tokens_at_once(obs):           # w00's second forward feeds one token more than it has
        rows(obs, "w00")[1][1][2] += 1

    def forgets_its_cache(obs):            # w00's second forward finds one token fewer and feeds one more
        _, row = rows(obs, "w00")[1]
        row[1] -= 1
        row[2] += 1

    def before_arrival(obs):               # w13 (arrives at 0.15 s) moved into a forward that starts before then
        i, row = rows(obs, "w13")[0]
        early = max(j for j in range(1, i) if good["times"][j - 1] < 0.15 and len(obs["log"][j]) < 8)
        obs["log"][i].remove(row)
        obs["log"][early].append(row)

    def twice(obs):                        # the smallest row of a forward of 7 requests, listed twice
        call = next(c for c in obs["log"] if len(c) == 7)
        call.append(list(min(call, key=lambda r: r[1] + r[2])))

    def cache_kept_past_the_pool(obs):     # w00 fed once more after its end, finding its cache kept all along
        _, (name, cached, new) = rows(obs, "w00")[-1]
        obs["log"][-1].append([name, cached + new, 1])

    assert "one new token a forward" in forged(two_tokens_at_once)
    assert "in its cache, which held" in forged(forgets_its_cache)
    assert "which arrives at 0.15 s" in forged(before_arrival)
    assert "holds request" in forged(twice) and "twice" in forged(twice)
    assert "the requests held" in forged(cache_kept_past_the_pool) and "more than the pool's 32" in \
        forged(cache_kept_past_the_pool)
    assert "'w99', a request the workload never sent" in forged(lambda o: o["log"][-1].append(["w99", 0, 3]))
    with pytest.raises(perf.ImpossibleLog, match="twice"):
        perf.figures(_forged_run())


def test_a_fake_engine_earns_no_performance_points_no_rank_and_a_review_flag(monkeypatch, tmp_path):
    """The whole pipeline on a fake: the workload probe (in the student's process, so a submission
    can replace it) reports _forged_run(); both performance cases fail, the record flags it for
    review, and the leaderboard lists it without a rank."""
    from types import SimpleNamespace

    from autograder.graders.lab07 import probes
    forged = _forged_run()
    monkeypatch.setattr(probes, "run_workload", lambda *a, **k: copy_of(forged))
    result = run_test(get_tests("lab07")["engine_runs_each_request_as_if_alone"], _namespace())
    cases = {c.name: c for c in result.cases}
    for name in ("makespan_within_margin_of_the_reference", "p95_ttft_within_margin_of_the_reference"):
        assert not cases[name].passed and cases[name].points == 0 and "impossible" in cases[name].message
        assert "twice" in cases[name].review
        assert "review" not in reports.case_line(cases[name])
    review = reports._review(SimpleNamespace(cells=[]), [result])
    assert any("makespan_within_margin_of_the_reference" in line and "impossible" in line for line in review)
    folder = _graded_folder(tmp_path, [
        _record("fake", [vars(c) for c in result.cases]),
        _record("honest", [_case("makespan_within_margin_of_the_reference", True, _figures(0.9, 0.27))])])
    ranked = {r["student"]: r["rank"] for r in leaderboard.rows(folder, "lab07")[0]}
    assert ranked == {"honest": 1, "fake": None}


def copy_of(obs):
    import copy
    return copy.deepcopy(obs)
