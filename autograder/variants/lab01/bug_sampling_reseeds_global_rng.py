"""Calls torch.manual_seed(seed) and samples from the global RNG. Runs replay, but the
caller's global random state is overwritten as a side effect."""
from autograder.reference.lab01 import *  # noqa: F401,F403
from autograder.reference import lab01 as _ref

EXPECT_FAIL = {"sampling_is_seeded": ["global_rng_untouched"]}


def run_experiment(model, *, temperature, seed, max_tokens):
    check_temperature(temperature)
    if temperature != 0 and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"`seed` must be an integer, got {seed!r}.")
    if temperature != 0:
        torch.manual_seed(seed)
    return _ref.run_experiment(model, temperature=temperature, seed=seed, max_tokens=max_tokens)
