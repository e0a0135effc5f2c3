"""The percentiles are always P50, P95 and P99, whatever `qs` asks for."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {"group_percentiles_by_edges": ["percentiles_named_by_qs"]}


def group_percentiles(rows, by, edges, metric, qs=(50, 95, 99)):
    if len(edges) == 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"`edges` must be a non-empty, strictly increasing list, got {edges!r}.")
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
        for q in (50, 95, 99):     # BUG: `qs` is ignored
            group[f"p{q:g}"] = percentile(values, q) if values else None
        out.append(group)
    return out
