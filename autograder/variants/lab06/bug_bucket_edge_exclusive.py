"""Buckets and groups with the wrong edge inclusion: a value equal to an edge goes to the
NEXT bucket ([lo, hi) as numpy.histogram does) instead of the one the edge closes (le)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"buckets_and_histogram_percentile": ["value_on_an_edge_is_in_that_bucket"],
               "group_percentiles_by_edges": ["ttft_by_input_length", "edges_are_inclusive_above"]}


def bucket_counts(values, boundaries):
    counts = [0] * (len(boundaries) + 1)
    for v in values:
        i = 0
        while i < len(boundaries) and v >= boundaries[i]:   # BUG: a value on an edge goes to the next bucket
            i += 1
        counts[i] += 1
    return counts


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    if len(edges) == 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"`edges` must be a non-empty, strictly increasing list, got {edges!r}.")
    groups = [[] for _ in range(len(edges) + 1)]
    for row in rows:
        if row[metric] is None:
            continue
        i = 0
        while i < len(edges) and row[by] >= edges[i]:   # BUG: the same for the groups
            i += 1
        groups[i].append(row[metric])
    out = []
    for i, values in enumerate(groups):
        group = {"lo": edges[i - 1] if i > 0 else None, "hi": edges[i] if i < len(edges) else None, "n": len(values)}
        for q in qs:
            group[f"p{q:g}"] = percentile(values, q) if values else None
        out.append(group)
    return out
