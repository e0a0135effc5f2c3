"""Helpers for writing fixtures. Used by fixtures_*.py in this folder.

Every number a fixture holds comes from a seeded random.Random, rounded to 4
decimals, so `make fixtures` rewrites the same bytes on every machine.
"""
from __future__ import annotations

import json
import math
import random

EOS = "<eos>"
ROUND = 4


def fixture(name, description, exercises, vocab, steps, *, eos_token_id=None, prompt_ids=(), params=None,
            digits=ROUND):
    """One fixture in its JSON form (see datasets/fixtures/README.md).

    digits=None keeps full float64 precision (needed where a probability must
    come out exact, e.g. a top-p boundary).
    """
    assert len(set(vocab)) == len(vocab), f"{name}: duplicate vocab entries"
    for i, row in enumerate(steps):
        assert len(row) == len(vocab), f"{name}: step {i} has {len(row)} logits for {len(vocab)} tokens"
    return {
        "name": name,
        "schema_version": 1,
        "description": description,
        "exercises": list(exercises),
        "vocab": list(vocab),
        "eos_token_id": eos_token_id,
        "prompt_ids": list(prompt_ids),
        "params": dict(params or {}),
        "steps": [[_encode(x, digits) for x in row] for row in steps],
    }


def scripted(name, description, exercises, pieces, *, seed, extra_vocab=(), prompt=("<prompt>",),
             margin=6.0, end_with_eos=True, params=None):
    """A fixture whose greedy path spells out `pieces`, one token per step.

    The target token of each step gets `margin` more than a noisy background,
    so greedy decoding follows the script and sampling at T=1 mostly does too.
    """
    vocab = [EOS]
    for tok in list(prompt) + list(pieces) + list(extra_vocab):
        if tok not in vocab:
            vocab.append(tok)
    rng = random.Random(seed)
    targets = [vocab.index(p) for p in pieces] + ([0] if end_with_eos else [])
    steps = []
    for t in targets:
        row = [rng.gauss(0.0, 1.0) for _ in vocab]
        row[t] = max(row) + margin
        steps.append(row)
    prompt_ids = [vocab.index(p) for p in prompt]
    return fixture(name, description, exercises, vocab, steps, eos_token_id=0,
                   prompt_ids=prompt_ids, params=params)


def _encode(x, digits=ROUND):
    if isinstance(x, str):
        return x
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if digits is None:
        return float(x)
    r = round(float(x), digits)
    return int(r) if r == int(r) and abs(r) < 1e15 else r


def dumps(fx: dict) -> str:
    """Stable text: keys in a fixed order, one logit row per line."""
    head = {k: v for k, v in fx.items() if k != "steps"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    rows = [json.dumps(r) for r in fx["steps"]]
    lines.append('  "steps": [')
    lines.extend(f"    {r}{',' if i < len(rows) - 1 else ''}" for i, r in enumerate(rows))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dumps_listed(head: dict, key: str, items: list, *, sort_keys: bool = False) -> str:
    """Stable text for a file of many records: the head's keys one per line, then `key` with
    one item per line (what allocator_ops.json and lab03_runs.json are written as)."""
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [f"  {json.dumps(key)}: ["]
    lines += [f"    {json.dumps(x, sort_keys=sort_keys)}{',' if i < len(items) - 1 else ''}" for i, x in enumerate(items)]
    return "\n".join(lines + ["  ]", "}"]) + "\n"
