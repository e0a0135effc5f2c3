"""Compares the greedy token at each position instead of the logits: a position
whose logits moved but whose argmax did not is missed. (Nor does it check the ids'
type or atol.)"""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"changed_positions_shows_causality": ["non_causal_model_changes_everywhere"]}


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    # BUG: neither the ids' type nor atol is checked
    if other_ids.shape != input_ids.shape:
        raise ValueError(f"`other_ids` must have the shape of `input_ids` {tuple(input_ids.shape)}, "
                         f"got {tuple(other_ids.shape)}.")
    a = model(input_ids)[0].argmax(dim=-1)          # BUG: only the best token, not the logits
    b = model(other_ids)[0].argmax(dim=-1)
    return torch.nonzero(a != b).flatten().tolist()
