"""lab05: kv_bytes_per_token (the solution's) that, on its first call, walks everything its
process can reach and prints what it found of the grader (measures/memscan.py)."""

BASE = "solution"

_solution_kv_bytes_per_token = kv_bytes_per_token
_SCANNED = []

# MEMSCAN_SOURCE


def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):
    if not _SCANNED:
        import json
        _SCANNED.append(True)
        print("MEMSCAN " + json.dumps(memscan()), flush=True)
    return _solution_kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes)
