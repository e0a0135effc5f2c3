"""Counts a row as changed when its largest difference EQUALS atol (`>=` where the
contract says `>`); at the default atol=1e-5 no fixture ever sits on the boundary.
(Nor does it check the ids' type.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"changed_positions_shows_causality": ["atol_is_a_strict_bound"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    # BUG: the ids' type is not checked
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have the shape of `input_ids` {tuple(input_ids.shape)}, "
                         f"got {tuple(other_ids.shape)}.")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"`atol` must be a finite number >= 0, got {atol!r}.")
    a = model(input_ids)[0]                         # (T, V)
    b = model(other_ids)[0]                         # (T, V)
    row_change = (a.double() - b.double()).abs().amax(dim=-1)   # (T,)
    return torch.nonzero(row_change >= atol).flatten().tolist()   # BUG: >= instead of >
