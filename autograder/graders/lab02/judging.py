"""Judging helpers shared by lab02's tests (grading process only: they use the reference)."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import reference_rejects, rejects, result_of, unchanged
from autograder.core import Fail, as_tensor, describe
from autograder.reference import lab02 as ref

from .probes import FILTER_CALLS, INVALID_CALLS


def _label(make, kwargs):
    args = ", ".join([f"<{getattr(make, 'label', 'logits')}>"] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return f"({args})"


def _ids(mask_row):
    return torch.nonzero(mask_row).flatten().tolist()


def check_filtered(obs, x, expected, *, call, hint, compare="values"):
    """One filter result against the expected logits.

    compare="values": kept tokens must hold the input's values (top-k, top-p);
    compare="probs":  softmax of the result must equal softmax of expected (the pipeline).
    """
    got = as_tensor(result_of(obs, call, hint, expected="filtered logits"), "the result")
    if tuple(got.shape) != tuple(x.shape):
        raise Fail(f"{call} returned shape {tuple(got.shape)} for input shape {tuple(x.shape)}",
                   expected=list(x.shape), got=list(got.shape),
                   hint="Work on the last dimension and keep the input's shape: (V,) -> (V,), (B, V) -> (B, V).")
    if got.dtype != x.dtype:
        raise Fail(f"{call} returned dtype {got.dtype}, the input was {x.dtype}", expected=str(x.dtype),
                   got=str(got.dtype), hint="Keep the input's dtype (masked_fill on the input does).")
    if torch.isnan(got).any():
        raise Fail(f"{call} returned NaN", got=describe(obs["result"]),
                   hint="Removed tokens must be -inf, never NaN; compute probabilities with torch.softmax.")
    got_keep, exp_keep = torch.isfinite(got), torch.isfinite(expected)
    if not torch.equal(got_keep, exp_keep):
        g2, e2 = got_keep.reshape(-1, got.shape[-1]), exp_keep.reshape(-1, got.shape[-1])
        row = int(torch.nonzero((g2 != e2).any(-1))[0])
        where = f" in row {row}" if got.dim() == 2 else ""
        if int(g2[row].sum()) == int(e2[row].sum()) and call.startswith("top_p_filter"):
            # the right NUMBER of tokens, but not the right ones: the cutoff is right, the mapping
            # from sorted order back to token ids is not (e.g. gather where scatter was needed)
            hint = (f"You kept the right number of tokens ({int(e2[row].sum())}) but not the right ones: a mask "
                    "computed in sorted order must be put back in vocabulary order (mask.scatter(-1, "
                    "sorted_idx, sorted_mask), or index with the inverse permutation), not gathered.")
        raise Fail(f"{call} kept the wrong tokens{where}", expected=f"kept ids {_ids(e2[row])}",
                   got=f"kept ids {_ids(g2[row])}", hint=hint)
    if not torch.equal(got[~got_keep], expected[~exp_keep]):   # -inf at every removed token, as expected
        raise Fail(f"{call} marked removed tokens with something other than -inf",
                   expected=sorted(set(expected[~exp_keep].tolist()))[:3], got=sorted(set(got[~got_keep].tolist()))[:3],
                   hint="Use masked_fill(mask, float('-inf')) so the result composes with the next filter.")
    if compare == "values":
        if not torch.allclose(got[got_keep].double(), x[got_keep].double(), atol=1e-6, rtol=0):
            raise Fail(f"{call} changed the logits of kept tokens", expected="the input's values at kept tokens",
                       got="different values",
                       hint="A filter only removes tokens: return the input's logits at kept tokens, "
                            "not probabilities or log-probabilities.")
    else:
        pg, pe = torch.softmax(got.double(), -1), torch.softmax(expected.double(), -1)
        if not torch.allclose(pg, pe, atol=1e-5, rtol=1e-4):
            diff = float((pg - pe).abs().max())
            raise Fail(f"{call} keeps the right tokens but with the wrong probabilities (max difference {diff:.2g})",
                       expected="softmax equal to transformers' within 1e-5", got=f"max difference {diff:.2g}",
                       hint=hint)
    if not obs["unchanged"]:
        raise Fail(f"{call} changed the logits tensor it was given",
                   hint="Never modify the input in place: use masked_fill (not masked_fill_), logits / T "
                        "(not logits /= T), and no logits[...] = ... assignments.")
    unchanged(obs, call)


def judge_filtered(obs, fn_name, key, expected_fn, hint, compare="values"):
    """Every call of FILTER_CALLS[key] against expected_fn(input, **kwargs)."""
    calls = FILTER_CALLS[key]
    if not isinstance(obs, list) or len(obs) != len(calls):
        raise Fail("the probe returned an unexpected observation", got=describe(obs))
    for (make, kwargs), o in zip(calls, obs):
        x = make()
        check_filtered(o, x, expected_fn(x, **kwargs), call=f"{fn_name}{_label(make, kwargs)}",
                       hint=hint, compare=compare)


def judge_invalid(obs, fn_name, key, hint):
    """Each bad call of INVALID_CALLS[key] raised ValueError naming its parameter and showing the value."""
    make, bad, extra = INVALID_CALLS[key]
    for (param, kwargs), o in zip(bad, obs):
        call = f"{fn_name}(logits, {param}={kwargs[param]!r})"
        reference_rejects(getattr(ref, fn_name), (make(),), dict(kwargs, **(extra or {})), call)
        rejects(o, call, param, kwargs[param], hint)


def case(name, *values, probe, visible=False, fixture=None, hint=None):
    """One row of a case table: `values` for the test's parameters, the probe call
    (name, *plain args), and the report fields of the case."""
    return pytest.param(*values, id=name, marks=[pytest.mark.probe(*probe),
                                                  pytest.mark.cell(visible=visible, fixture=fixture, hint=hint)])
