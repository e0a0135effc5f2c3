"""Takes the last maximum (argmax of the flipped row): ties go to the highest id."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"greedy_token_ids_break_ties_low": ["exact_tie_goes_to_lowest_id", "batch_shape_2_3_v",
                                                   "pos_inf_rows"]}

_greedy_token_ids = greedy_token_ids   # the solution's, kept before it is replaced (apply_temperature uses it)


def greedy_token_ids(logits):
    check_logits(logits)
    return logits.shape[-1] - 1 - torch.argmax(torch.flip(logits, dims=[-1]), dim=-1)   # BUG: the last maximum


_apply_temperature = apply_temperature


def apply_temperature(logits, temperature):   # the solution's T = 0 on the solution's greedy_token_ids
    scaled = _apply_temperature(logits, temperature)
    if temperature != 0:
        return scaled
    winner = _greedy_token_ids(logits).unsqueeze(-1)           # (..., 1)
    return torch.full_like(logits, -math.inf).scatter(-1, winner, logits.gather(-1, winner))
