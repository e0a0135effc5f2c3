"""log_softmax as log(softmax(x)): where softmax underflows to 0 (a gap of 2e4 in the
logits) the log is -inf, though the true log-probability is a finite -2e4."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"log_softmax_is_stable": ["extreme_logits_1e4", "batch_shape_2_3_v"]}


def log_softmax(logits):
    return torch.log(softmax(logits))   # BUG: -inf where softmax underflows
