"""Checks only that the two shapes match: float ids reach the model, and a negative,
NaN or infinite atol is used as given (nan compares False: nothing ever changes)."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"changed_positions_shows_causality": ["rejects_bad_ids_and_atol"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    # BUG: neither the ids' type nor atol is checked
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have the shape of `input_ids` {tuple(input_ids.shape)}, "
                         f"got {tuple(other_ids.shape)}.")
    a = model(input_ids)[0]                         # (T, V)
    b = model(other_ids)[0]                         # (T, V)
    row_change = (a.double() - b.double()).abs().amax(dim=-1)   # (T,)
    return torch.nonzero(row_change > atol).flatten().tolist()
