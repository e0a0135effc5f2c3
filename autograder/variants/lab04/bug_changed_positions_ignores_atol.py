"""Compares with a hard-coded tolerance instead of the `atol` argument: right at the
default, wrong whenever a caller passes another one."""
import torch

from autograder.reference.lab04 import (generate_cached, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"changed_positions_shows_causality": ["atol_is_a_strict_bound"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have shape {tuple(input_ids.shape)}, got {tuple(other_ids.shape)}.")
    diff = (model(input_ids)[0] - model(other_ids)[0]).abs().amax(dim=-1)   # (T,)
    return [t for t in range(diff.numel()) if float(diff[t]) > 1e-5]   # BUG: ignores atol
