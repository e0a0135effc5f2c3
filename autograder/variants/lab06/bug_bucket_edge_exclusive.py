"""Buckets and groups with the wrong edge inclusion: a value equal to an edge goes to the
NEXT bucket ([lo, hi) as numpy.histogram does) instead of the one the edge closes (le)."""
import bisect

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["value_on_an_edge_is_in_that_bucket"],
               "group_percentiles_by_edges": ["ttft_by_input_length", "edges_are_inclusive_above"]}


def bucket_counts(values, boundaries):
    counts = [0] * (len(boundaries) + 1)
    for v in values:
        counts[bisect.bisect_right(boundaries, v)] += 1   # BUG: v == an edge goes to the next bucket
    return counts


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"`edges` must increase, got {edges!r}.")
    groups = [[] for _ in range(len(edges) + 1)]
    for row in rows:
        if row[metric] is not None:
            groups[bisect.bisect_right(edges, row[by])].append(row[metric])   # BUG: the same for the groups
    return [{"lo": edges[i - 1] if i else None, "hi": edges[i] if i < len(edges) else None, "n": len(g),
             **{f"p{q:g}": percentile(g, q) if g else None for q in qs}} for i, g in enumerate(groups)]
