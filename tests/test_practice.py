"""course.practice: Lab 07's practice workload and its figures, checked by hand on small
workloads and for the same numbers on every run."""
from __future__ import annotations

import pytest

from course.batched import ScriptedBatchedModel
from course.engine import Engine
from course.practice import figures, measure, practice_workload, run

VOCAB = ["<e>", "a", "b", "c", "d", "e", "f", "g"]


def _model():
    return ScriptedBatchedModel(VOCAB, {(1, 2, 3): [4] * 10, (2, 3): [5] * 10}, eos_token_id=0)


def _work(requests, cost=(1.0, 0.1, 0.0), **config):
    return {"requests": requests, "cost": cost,
            "config": {"num_blocks": 16, "block_size": 2, "max_batch": 4, "watermark_blocks": 0, **config}}


def test_one_request_by_hand():
    # step 1 feeds the 3-token prompt: 1 + 0.1 * 3 = 1.3 s; each decode feeds 1 token: 1.1 s
    result = run(Engine, _model(), _work([(0.0, [1, 2, 3], 3)]))
    assert result["requests"][0]["tokens"] == [4, 4, 4]
    assert result["requests"][0]["times"] == pytest.approx([1.3, 2.4, 3.5])
    assert figures(result) == pytest.approx({"makespan": 3.5, "ttft_mean": 1.3, "ttft_p95": 1.3, "tpot_p95": 1.1})


def test_idle_time_passes_to_the_next_arrival_and_batching_shares_a_step():
    # the second request arrives at 10 s, when the first is long done: TTFT counts from 10 s
    late = run(Engine, _model(), _work([(0.0, [1, 2, 3], 2), (10.0, [2, 3], 2)]))
    assert late["requests"][1]["times"] == pytest.approx([11.2, 12.3])
    assert figures(late)["makespan"] == pytest.approx(12.3)
    # both at 0: one forward feeds 3 + 2 tokens (1.5 s), then one token each (1.2 s)
    both = run(Engine, _model(), _work([(0.0, [1, 2, 3], 2), (0.0, [2, 3], 2)]))
    assert [r["times"] for r in both["requests"]] == [pytest.approx([1.5, 2.7])] * 2
    assert figures(both) == pytest.approx({"makespan": 2.7, "ttft_mean": 1.5, "ttft_p95": 1.5, "tpot_p95": 1.2})


def test_the_practice_workload_gives_the_same_figures_every_run():
    work = practice_workload(12, vocab_size=len(VOCAB))
    prompts = {tuple(p) for _, p, _ in work["requests"]}
    assert len(prompts) == 12 and work["config"]["max_overtakes"] == 4
    shared = practice_workload(12, shared_prefix=6, vocab_size=len(VOCAB))
    assert all(p[:6] == shared["requests"][0][1][:6] for _, p, _ in shared["requests"])
    longest = max(len(p) for _, p, _ in work["requests"]) + 24
    model = ScriptedBatchedModel(VOCAB, {p: [1] * 30 for p in prompts}, max_context=longest)
    first, second = measure(Engine, model, work), measure(Engine, model, work)
    assert first == second and set(first) == {"makespan", "ttft_mean", "ttft_p95", "tpot_p95"}
    assert 0 < first["ttft_mean"] <= first["ttft_p95"] < first["makespan"]


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="`n_requests`.*got 0"):
        practice_workload(0)
    with pytest.raises(ValueError, match="`shared_prefix`.*got -1"):
        practice_workload(shared_prefix=-1)
    with pytest.raises(ValueError, match="`workload` must be a dict"):
        run(Engine, _model(), [(0.0, [1, 2, 3], 2)])


def test_an_engine_that_loses_tokens_gets_no_figures():
    class Lossy(Engine):
        def step(self):
            outs = super().step()
            for o in outs:
                o.new_token_ids = list(o.new_token_ids)[:0] if o.request_id.endswith("2") else o.new_token_ids
            return outs
    with pytest.raises(ValueError, match=r"request\(s\) \[1\] did not get their max_tokens"):
        measure(Lossy, _model(), _work([(0.0, [1, 2, 3], 2), (0.0, [2, 3], 2)]))
