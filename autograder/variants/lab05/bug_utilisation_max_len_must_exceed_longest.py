"""Rejects max_len equal to the longest length (`<=` where the contract says max_len >= every length): lengths
[5, 8] with max_len=8 raise ValueError instead of giving 13 / 16."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'utilisation_paged_vs_contiguous': ['contiguous_max_len']}


def utilisation(lengths, *, block_size=None, max_len=None):
    if type(lengths) not in (list, tuple) or not lengths or any(type(n) is not int or n < 1 for n in lengths):
        raise ValueError(f"`lengths` must be a non-empty list of integers >= 1, got {lengths!r}.")
    if (block_size is None) == (max_len is None):
        raise ValueError(f"`block_size` or `max_len` must be given, exactly one, got block_size={block_size!r} "
                         f"and max_len={max_len!r}.")
    if block_size is not None:
        if type(block_size) is not int or block_size < 1:
            raise ValueError(f"`block_size` must be an integer >= 1, got {block_size!r}.")
        reserved = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    else:
        if type(max_len) is not int or max_len <= max(lengths):                    # BUG: equal is valid
            raise ValueError(f"`max_len` must be an integer >= the longest length {max(lengths)}, got {max_len!r}.")
        reserved = max_len * len(lengths)
    return sum(lengths) / reserved
