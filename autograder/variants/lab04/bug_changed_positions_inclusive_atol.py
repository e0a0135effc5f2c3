"""Counts a row as changed when its largest difference EQUALS atol (`>=` where the
contract says `>`); at the default atol=1e-5 no fixture ever sits on the boundary."""
import math

import torch

from autograder.reference.lab04 import (generate_cached, generate_uncached,  # noqa: F401
                                        latency_metrics, serve_request)

EXPECT_FAIL = {"changed_positions_shows_causality": ["atol_is_a_strict_bound"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have shape {tuple(input_ids.shape)}, got {tuple(other_ids.shape)}.")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"`atol` must be a finite number >= 0, got {atol!r}.")
    diff = (model(input_ids)[0].double() - model(other_ids)[0].double()).abs().amax(dim=-1)   # (T,)
    return torch.nonzero(diff >= atol).flatten().tolist()   # BUG: >= instead of >
