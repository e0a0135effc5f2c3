"""Calls torch.manual_seed(seed) and samples from the global RNG. Runs replay, but the
caller's global random state is overwritten as a side effect."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"sampling_is_seeded": ["global_rng_untouched"]}

_run = run_experiment   # the solution's, kept before it is replaced


def run_experiment(model, *, temperature, seed, max_tokens):
    if temperature != 0 and type(seed) is int:
        torch.manual_seed(seed)                                # BUG: the caller's global RNG is reseeded
    return _run(model, temperature=temperature, seed=seed, max_tokens=max_tokens)
