"""Scans the text for the first position where any stop string STARTS, so a long stop
string that begins early beats a short one that is complete sooner ("abcd" with
["abcd", "bc"] gives "abcd", not "bc")."""
BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"first_stop_finds_earliest_match": ["ends_first_not_starts_first"]}


def first_stop(text, stop):
    for start in range(len(text)):
        here = [s for s in stop if text.startswith(s, start)]   # BUG: the earliest start wins
        if here:
            longest = max(here, key=len)
            return (start, start + len(longest), longest)
    return None
