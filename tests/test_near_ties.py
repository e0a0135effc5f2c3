"""No near-ties where the graders compare tokens: every greedy step a grader compares token by
token has its top-1 logit ahead of its top-2 by at least MIN_TOP_GAP (1e-2, 100 x LOGIT_ATOL,
about 800 x the largest rounding difference measured across CPU kernels). A choice that close
to a tie could flip on another CPU, and a correct submission would lose points for it.

The runs walked: the tiny model's greedy runs of lab04 (generate, cached and uncached), lab05
(the parity runs and serve_all's requests) and lab07 (the tiny-model trace), with the steps and
EOS rule each grader uses; lab04's changed-positions rows (each row differs by 0 or by far more
than its atol); every logit fixture's rows; and the scripted and toy models by construction.
Where a run fails, give the case another prompt and recompute its expected values.
"""
from __future__ import annotations

import pytest
import torch

from autograder.rounding import LOGIT_ATOL, MIN_TOP_GAP


def test_the_margin_is_far_above_the_tolerance():
    assert MIN_TOP_GAP >= 100 * LOGIT_ATOL


def _tiny_runs() -> dict:
    """label -> (prompt ids, steps, stop at EOS) of each greedy tiny-model run a grader compares."""
    from autograder.checks import shipped_decoder
    from autograder.graders.lab04.probes import SHIPPED_PROMPT
    from autograder.graders.lab05._inputs import shipped, shipped_requests
    from autograder.graders.lab05.expected_memo import PARITY_RUNS
    from autograder.graders.lab07._inputs import TRACES
    from course.tiny_model import LAB_PROMPTS

    tokenizer = shipped_decoder()[1]
    lab04 = tokenizer.encode(LAB_PROMPTS[SHIPPED_PROMPT]).ids
    runs = {"lab04 generate, 10 steps": (lab04, 10, True), "lab04 cached, 16 steps, no EOS": (lab04, 16, False),
            "lab04 cached, to EOS": (lab04, 48, True)}
    prompts = shipped()[1]
    runs.update({f"lab05 parity {p}, {s} steps": (prompts[p], s, False) for p, s in PARITY_RUNS})
    runs.update({f"lab05 serve_all request {i}": (r["prompt"], r["max_tokens"], False)
                 for i, r in enumerate(shipped_requests())})
    # lab07's tiny trace: the prompts are lab07's own (_tiny.py, tokenized by the same tokenizer)
    from autograder.graders.lab07._tiny import tiny_prompts
    for _, name, params in TRACES["tiny"]["arrivals"]:
        runs[f"lab07 tiny trace {name}"] = (tiny_prompts()[name], params["max_tokens"], True)
    return runs


def _gaps(decoder, prompt, steps, eos, stop_at_eos):
    ids, gaps = list(prompt), []
    with torch.no_grad():
        for _ in range(steps):
            row = decoder(torch.tensor([ids]))[0, -1]                       # (V,)
            top = torch.topk(row, 2).values
            gaps.append(float(top[0] - top[1]))
            ids.append(int(row.argmax()))
            if stop_at_eos and ids[-1] == eos:
                break
    return gaps


@pytest.mark.slow
def test_every_greedy_step_the_graders_compare_on_the_tiny_model_is_clear_of_a_tie():
    from autograder.checks import one_thread, shipped_decoder
    decoder, _, eos = shipped_decoder()
    close = []
    with one_thread():
        for label, (prompt, steps, stop) in _tiny_runs().items():
            gaps = _gaps(decoder, prompt, steps, eos, stop)
            assert gaps, label
            close += [f"{label}: step {i} top-1/top-2 gap {g:.3g}" for i, g in enumerate(gaps) if g < MIN_TOP_GAP]
    assert not close, "near-ties that rounding could flip:\n" + "\n".join(close)


def test_lab04_changed_rows_are_clear_of_their_atol():
    """changed_positions on the tiny model: each row differs by exactly 0 (before the change) or by
    far more than the atol (from it on), so no rounding moves a row across the threshold."""
    from autograder.graders.lab04.probes import CHANGED, MODELS
    for key in ("tiny_model_change_middle_token", "change_last_token"):
        model, tokens, atol = CHANGED[key]
        a, b = tokens()
        with torch.no_grad():
            diff = (MODELS[model]()(torch.tensor([a])) - MODELS[model]()(torch.tensor([b])))[0].abs().amax(-1)
        near = [(t, float(d)) for t, d in enumerate(diff) if d != 0 and d < atol + MIN_TOP_GAP]
        assert not near and (diff == 0).any() and (diff > 0).any(), (key, diff.tolist())


def test_every_fixture_row_has_a_clear_top_token_or_an_exact_tie():
    """An exact tie is decided by the documented rule (the lowest id) on any machine; a gap under
    MIN_TOP_GAP is not a tie and not a clear choice."""
    from autograder.rounding import logit_fixtures
    close = []
    for name, logits in logit_fixtures().items():
        for s, row in enumerate(logits):
            if torch.isnan(row).any():
                continue                                       # nan_logits: graded as an error, not a token
            top = torch.topk(row, 2).values
            gap = float(top[0] - top[1])
            if 0 < gap < MIN_TOP_GAP:
                close.append(f"{name} step {s}: gap {gap:.3g}")
    assert not close, close


def test_scripted_and_toy_models_are_clear_by_construction():
    from autograder.graders.lab07._inputs import scripted
    from autograder.toy_models import TOY_PROMPT, ToyCausalLM, ids
    assert scripted().margin / 2 >= MIN_TOP_GAP          # margin at the scripted token, margin / 2 at the next
    logits = ToyCausalLM()(ids(TOY_PROMPT))[0]           # (T, V): permutations of 0..12
    top = torch.topk(logits, 2, dim=-1).values
    assert bool(((top[:, 0] - top[:, 1]) >= 1.0).all())
