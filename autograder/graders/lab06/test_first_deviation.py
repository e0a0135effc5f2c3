"""first_deviation(baseline, incident, threshold=0.25): the hidden cases of the cell
first_deviation_follows_the_table. The rows are probes.rows_of(set); the baseline is trace_baseline."""
from __future__ import annotations

import pytest

from autograder.checks import result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import case, records, same
from .probes import TRANSFORMS, cut_share, rows_of

pytestmark = pytest.mark.cell("first_deviation_follows_the_table",
                              description="first_deviation: the first stage that deviates, with evidence; noise is "
                                          "not a deviation")

SKIP_HINT = ("A median over no values does not exist: when either side has no value of a metric (every "
             "prefill None), skip that check and go on down the table; never compare with None or 0.")

# 24 baseline rows: cut-off shares 12/24 -> 17/24 and 3/24 -> 6/24 grow by less than 0.25 (absolute)
# but by more than 25 % (relative); 12/24 -> 21/24 grows by more than 0.25 either way
SHARE_PAIRS = [[0.5, 0.7], [0.125, 0.25], [0.5, 0.875]]


def row(incident, points=1, visible=False, transform=None, name=None):
    return case(name or f"diagnoses_{incident.removeprefix('trace_')}", incident, transform,
                probe=("deviation", incident, transform), points=points, visible=visible, fixture=incident)


@pytest.mark.parametrize("incident, transform", [
    row("trace_queue_incident", 2, visible=True),
    row("trace_prefill_incident", 2),
    row("trace_tpot_incident"),
    row("trace_decode_rounds_incident"),
    row("trace_kv_cache_incident", 2),
    row("trace_cut_off_incident"),
    row("trace_not_latency_incident"),
    row("trace_noise_only", 2, name="noise_is_not_a_deviation"),
    row("trace_queue_incident", 1, transform="slow_decode", name="queue_before_decode"),   # every TPOT x3
    # the incident has no prefill times at all: that check is skipped, the TPOT deviation found
    row("trace_tpot_incident", 1, transform="no_prefill", name="skips_a_metric_one_side_lacks"),
])
def test_diagnosis(observation, incident, transform):
    """The stage and evidence of the reference's diagnosis, or None where it finds only noise."""
    expected = ref.first_deviation(rows_of("trace_baseline"), TRANSFORMS[transform](rows_of(incident)))
    got = result_of({"result": observation}, f"first_deviation(<baseline>, <{incident}>)",
                    SKIP_HINT if transform == "no_prefill" else None)
    if expected is None:
        if got is not None:
            raise Fail(f"first_deviation(<baseline>, <{incident}>) reports a deviation in noise", expected=None,
                       got=got, hint="Differences within threshold * baseline + the minimum delta are noise: "
                                     "return None.")
        return
    if not isinstance(got, dict) or got.get("stage") != expected["stage"]:
        raise Fail(f"first_deviation(<baseline>, <{incident}>) names the wrong stage",
                   expected=expected["stage"], got=got.get("stage") if isinstance(got, dict) else describe(got),
                   hint="Walk the table in the order a request lives: queue, prefill, TPOT, decode rounds, "
                        "finish reasons, output quality; a queue deviation with a full KV pool is kv_cache.")
    for key in ("metric", "baseline", "incident"):
        ev, gv = expected[key], got.get(key)
        if not (ev == gv if isinstance(ev, str) else same(ev, gv, 1e-9)):
            raise Fail(f"the evidence {key!r} is wrong", expected=ev, got=gv,
                       hint="Evidence: the metric compared, its baseline and incident values (medians, or "
                            "shares for finish reasons and wrong answers).")


def _stage(d):
    return None if d is None else d.get("stage") if isinstance(d, dict) else describe(d)


@pytest.mark.probe("deviation_shares", SHARE_PAIRS)
@pytest.mark.cell(fixture="trace_baseline")
def test_share_growth_is_absolute(observation):
    """A share deviates by its absolute growth, not by its growth relative to the baseline share."""
    for (b, i), got in zip(SHARE_PAIRS, records(observation, len(SHARE_PAIRS))):
        call = f"first_deviation(<cut-off share {b}>, <cut-off share {i}>)"
        got = result_of({"result": got}, call)
        expected = ref.first_deviation(cut_share(rows_of("trace_baseline"), b), cut_share(rows_of("trace_baseline"), i))
        if _stage(got) != _stage(expected):
            raise Fail(f"{call} is wrong", expected=_stage(expected), got=_stage(got),
                       hint="A share deviates when it grows by more than threshold in absolute terms "
                            "(incident share - baseline share > 0.25), not relative to the baseline share: "
                            "from 0.5 to 0.7 is no deviation.")


EDGE_HINT = ("Follow the table to the letter: a median deviates when incident - baseline > threshold * baseline + "
             "MIN_DELTA, a share when incident - baseline > threshold: growth of exactly that much is no "
             "deviation; the cut_off share counts finish reasons length AND cancelled; one request on each side "
             "is enough to compare.")


def pairs_row(name, pairs, *, points=1):
    return case(name, pairs, probe=("deviation_pairs", pairs), points=points, fixture="trace_baseline")


@pytest.mark.parametrize("pairs", [
    # one request on each side (the contract asks only non-empty lists): the same request, no deviation
    pairs_row("one_request_each", [["first_row", "first_row"]]),
    # 12 of the 24 requests cancelled (and so wrong): the cut_off share grows 0.0 -> 0.5, finish_reason
    pairs_row("cancelled_counts_as_cut_off", [[None, "half_cancelled"]]),
    # growth of exactly the threshold: cut-off share 0.25 -> 0.5 (6 -> 12 of 24), and output_tokens medians
    # 8 -> 11 (0.25 * 8 + 1 = 3): neither is "more than", so None both times
    pairs_row("growth_of_exactly_the_threshold_is_noise", [["cut_quarter", "cut_half"], ["tokens_8", "tokens_11"]]),
])
def test_diagnosis_of_changed_rows(observation, pairs):
    """The reference's diagnosis (stage and evidence, or None) of trace_baseline's rows changed on each side."""
    for (b, i), got in zip(pairs, records(observation, len(pairs))):
        call = f"first_deviation(<baseline rows, {b or 'as they are'}>, <baseline rows, {i}>)"
        got = result_of({"result": got}, call, EDGE_HINT)
        base = rows_of("trace_baseline")
        expected = ref.first_deviation(TRANSFORMS[b](base), TRANSFORMS[i](base))
        if expected is None or got is None or not isinstance(got, dict):
            if got != expected:
                raise Fail(f"{call} is wrong", expected=expected, got=describe(got), hint=EDGE_HINT)
            continue
        for key in ("stage", "metric", "baseline", "incident"):
            ev, gv = expected[key], got.get(key)
            if not (ev == gv if isinstance(ev, str) else same(ev, gv, 1e-9)):
                raise Fail(f"{call}: {key!r} is wrong", expected=ev, got=gv, hint=EDGE_HINT)
