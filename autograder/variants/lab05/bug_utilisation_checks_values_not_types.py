"""Checks the values of lengths, block_size and max_len but not that they are ints: lengths [3, 2.5] and
max_len=8.0 are accepted, and block_size='4' raises TypeError from the comparison instead of ValueError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'utilisation_paged_vs_contiguous': ['rejects_bad_arguments']}


def utilisation(lengths, *, block_size=None, max_len=None):
    if type(lengths) not in (list, tuple) or not lengths or any(n < 1 for n in lengths):    # BUG: no type check
        raise ValueError(f"`lengths` must be a non-empty list of integers >= 1, got {lengths!r}.")
    if (block_size is None) == (max_len is None):
        raise ValueError(f"`block_size` or `max_len` must be given, exactly one, got block_size={block_size!r} "
                         f"and max_len={max_len!r}.")
    if block_size is not None:
        if block_size < 1:                    # BUG: no type check
            raise ValueError(f"`block_size` must be an integer >= 1, got {block_size!r}.")
        reserved = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    else:
        if max_len < max(lengths):                    # BUG: no type check
            raise ValueError(f"`max_len` must be an integer >= the longest length {max(lengths)}, got {max_len!r}.")
        reserved = max_len * len(lengths)
    return sum(lengths) / reserved
