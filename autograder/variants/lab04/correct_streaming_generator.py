"""A correct solution written differently: the cached loop is a Python generator
that yields each token as soon as it is known; the uncached loop keeps a plain
list; TPOT is the mean of the gaps between consecutive tokens."""
import math

import torch

EXPECT_FAIL = {}


def _validate(input_ids, max_new_tokens, eos_token_id):
    if not (isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2 and input_ids.shape[0] == 1
            and input_ids.shape[1] > 0 and input_ids.dtype == torch.long):
        raise ValueError(f"`input_ids` must be a (1, T) long tensor, got {input_ids!r}.")
    if type(max_new_tokens) is not int or max_new_tokens <= 0:
        raise ValueError(f"`max_new_tokens` must be a positive integer, got {max_new_tokens!r}.")
    if eos_token_id is not None and (type(eos_token_id) is not int or eos_token_id < 0):
        raise ValueError(f"`eos_token_id` must be None or an id >= 0, got {eos_token_id!r}.")


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    for name, ids in (("input_ids", input_ids), ("other_ids", other_ids)):
        if not (isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[0] == 1 and ids.shape[1] > 0
                and ids.dtype == torch.long):
            raise ValueError(f"`{name}` must be a (1, T) long tensor, got {ids!r}.")
    if tuple(other_ids.shape) != tuple(input_ids.shape):
        raise ValueError(f"`other_ids` has shape {tuple(other_ids.shape)}; it must match "
                         f"`input_ids` {tuple(input_ids.shape)}.")
    if not (type(atol) in (int, float) and math.isfinite(atol) and atol >= 0):
        raise ValueError(f"`atol` must be a finite number >= 0, got {atol!r}.")
    rows_a, rows_b = model(input_ids)[0].tolist(), model(other_ids)[0].tolist()
    return [t for t, (ra, rb) in enumerate(zip(rows_a, rows_b))
            if max(abs(x - y) for x, y in zip(ra, rb)) > atol]


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    _validate(input_ids, max_new_tokens, eos_token_id)
    sequence = input_ids[0].tolist()
    new = []
    for _ in range(max_new_tokens):
        logits = model(torch.tensor([sequence]))       # (1, T, V)
        token = int(torch.argmax(logits[0, len(sequence) - 1]))
        new.append(token)
        sequence.append(token)
        if eos_token_id is not None and token == eos_token_id:
            break
    return new


def _stream(decoder, input_ids, max_new_tokens, eos_token_id):
    logits, kv = decoder.prefill(input_ids)
    for i in range(max_new_tokens):
        token = int(logits[0, -1].argmax())
        yield token
        if token == eos_token_id or i == max_new_tokens - 1:
            return
        logits, kv = decoder.decode(torch.tensor([[token]], dtype=torch.long), kv)


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    _validate(input_ids, max_new_tokens, eos_token_id)
    tokens = []
    for token in _stream(decoder, input_ids, max_new_tokens, eos_token_id):
        tokens.append(token)
        if on_token:
            on_token(token)
    return tokens


def latency_metrics(arrival_time, token_times):
    if type(arrival_time) not in (int, float) or not math.isfinite(arrival_time) or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a finite time >= 0, got {arrival_time!r}.")
    if type(token_times) not in (list, tuple) or not token_times:
        raise ValueError(f"`token_times` must be a non-empty list, got {token_times!r}.")
    bad = [t for t in token_times if type(t) not in (int, float) or not math.isfinite(t)]
    if bad:
        raise ValueError(f"`token_times` must hold finite numbers, got {bad[0]!r}.")
    if token_times[0] < arrival_time:
        raise ValueError(f"`token_times` starts at {token_times[0]!r}, before `arrival_time` {arrival_time!r}.")
    gaps = [b - a for a, b in zip(token_times, token_times[1:])]
    for gap, later in zip(gaps, token_times[1:]):
        if gap < 0:
            raise ValueError(f"`token_times` must never go back in time, got {later!r}.")
    return {"ttft": token_times[0] - arrival_time,
            "tpot": sum(gaps) / len(gaps) if gaps else None,
            "e2e": token_times[-1] - arrival_time}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    if arrival_time > clock():
        raise ValueError(f"`arrival_time` {arrival_time!r} is later than now ({clock()!r}).")
    tokens, times = [], []
    for token in _stream(decoder, input_ids, max_new_tokens, eos_token_id):
        times.append(clock())
        tokens.append(token)
    metrics = latency_metrics(arrival_time, times)
    return {"tokens": tokens, "token_times": times, **metrics}


def _outcomes(completions, quality_set):
    """Yield (prompt, exact, well_formed) for each item, lazily."""
    import json

    import jsonschema

    validator = jsonschema.Draft202012Validator(quality_set["schema"])
    for item in quality_set["items"]:
        try:
            value = json.loads(completions[item["prompt"]])
        except json.JSONDecodeError:
            yield item["prompt"], False, False
            continue
        yield item["prompt"], value == item["expected"], validator.is_valid(value)


def quality_score(completions, quality_set):
    if not isinstance(quality_set, dict) or not quality_set.get("items"):
        raise ValueError(f"`quality_set` must be a quality set with items, got {quality_set!r}.")
    if not isinstance(completions, dict):
        raise ValueError(f"`completions` must be a dict, got {completions!r}.")
    wanted = {item["prompt"] for item in quality_set["items"]}
    odd = next((p for p in list(wanted) + list(completions) if (p in wanted) != (p in completions)), None)
    if odd is not None:
        raise ValueError(f"`completions` and the quality set disagree on the prompt {odd!r}.")
    if not all(isinstance(text, str) for text in completions.values()):
        raise ValueError(f"`completions` must hold str values, got {completions!r}.")
    rows = list(_outcomes(completions, quality_set))
    n = len(rows)
    return {"n": n, "exact": sum(e for _, e, _ in rows) / n, "schema_pass": sum(w for _, _, w in rows) / n,
            "exact_prompts": [p for p, e, _ in rows if e]}


SCORE_KEYS = ("n", "exact", "schema_pass", "exact_prompts")


def regressed(baseline, candidate, *, tolerance):
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise ValueError(f"`tolerance` must be a number in [0, 1], got {tolerance!r}.")
    bad = next((name for name, score in (("baseline", baseline), ("candidate", candidate))
                if not isinstance(score, dict) or not all(k in score for k in SCORE_KEYS)), None)
    if bad is not None:
        raise ValueError(f"`{bad}` must be a dict with the keys {SCORE_KEYS}.")
    if baseline["n"] != candidate["n"]:
        raise ValueError(f"`candidate` was scored on {candidate['n']} prompts, the baseline on {baseline['n']}.")
    dropped = list(m for m in ("exact", "schema_pass") if baseline[m] - candidate[m] > tolerance)
    lost = list(p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"])
    return bool(dropped), " | ".join(dropped + [f"lost {p!r}" for p in lost]) or "kept"
