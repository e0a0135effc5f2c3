"""group_percentiles rejects a q of 0 in `qs` (percentiles "in (0, 100]"), though the 0th percentile
is each group's smallest value."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"group_percentiles_by_edges": ["q_0_is_each_groups_min"]}


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    if len(edges) == 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"`edges` must be a non-empty, strictly increasing list, got {edges!r}.")
    if not all(0 < q <= 100 for q in qs):     # BUG: q = 0 is a percentile too
        raise ValueError(f"`qs` must be percentiles in (0, 100], got {qs!r}.")
    groups = [[] for _ in range(len(edges) + 1)]
    for row in rows:
        if row[metric] is None:
            continue
        i = 0
        while i < len(edges) and row[by] > edges[i]:
            i += 1
        groups[i].append(row[metric])
    out = []
    for i, values in enumerate(groups):
        group = {"lo": edges[i - 1] if i > 0 else None, "hi": edges[i] if i < len(edges) else None, "n": len(values)}
        for q in qs:
            group[f"p{q:g}"] = percentile(values, q) if values else None
        out.append(group)
    return out
