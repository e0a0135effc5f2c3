"""Uses block_size when it is given and max_len otherwise, without checking that exactly one was given:
with both it silently answers the paged question (with neither, the max_len check happens to raise)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'utilisation_paged_vs_contiguous': ['exactly_one_of_block_size_and_max_len']}


def utilisation(lengths, *, block_size=None, max_len=None):
    if type(lengths) not in (list, tuple) or not lengths or any(type(n) is not int or n < 1 for n in lengths):
        raise ValueError(f"`lengths` must be a non-empty list of integers >= 1, got {lengths!r}.")
    # BUG: no check that exactly one of block_size and max_len was given
    if block_size is not None:
        if type(block_size) is not int or block_size < 1:
            raise ValueError(f"`block_size` must be an integer >= 1, got {block_size!r}.")
        reserved = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    else:
        if type(max_len) is not int or max_len < max(lengths):
            raise ValueError(f"`max_len` must be an integer >= the longest length {max(lengths)}, got {max_len!r}.")
        reserved = max_len * len(lengths)
    return sum(lengths) / reserved
