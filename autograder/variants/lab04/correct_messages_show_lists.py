"""A correct solution whose error messages show the whole value they got (the list
of timestamps, the tensor's shape as a list), and whose loops use explicit indices."""
import math

import torch

EXPECT_FAIL = {}


def _check_ids(name, ids):
    if not isinstance(ids, torch.Tensor) or list(ids.shape)[:1] != [1] or ids.dim() != 2 or ids.shape[1] == 0 \
            or ids.dtype != torch.long:
        raise ValueError(f"`{name}` must be a (1, T) long tensor, got {ids!r}.")


def _check_args(input_ids, max_new_tokens, eos_token_id):
    _check_ids("input_ids", input_ids)
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an int >= 1 (got {max_new_tokens}).")
    if eos_token_id is not None and (type(eos_token_id) is not int or eos_token_id < 0):
        raise ValueError(f"`eos_token_id` must be None or an int >= 0 (got {eos_token_id}).")


def changed_positions(model, input_ids, other_ids, atol=1e-5):
    _check_ids("input_ids", input_ids)
    _check_ids("other_ids", other_ids)
    if list(other_ids.shape) != list(input_ids.shape):
        raise ValueError(f"`other_ids` must have the shape of input_ids, got shape {list(other_ids.shape)}.")
    if type(atol) not in (int, float) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"`atol` must be finite and >= 0 (got {atol}).")
    a, b = model(input_ids), model(other_ids)
    out = []
    for t in range(a.shape[1]):
        if float((a[0, t] - b[0, t]).abs().max()) > atol:
            out.append(t)
    return out


def generate_uncached(model, input_ids, max_new_tokens, eos_token_id=None):
    _check_args(input_ids, max_new_tokens, eos_token_id)
    seq = input_ids[0].tolist()
    new = []
    for _ in range(max_new_tokens):
        token = int(model(torch.tensor([seq]))[0, -1].argmax())
        new.append(token)
        seq.append(token)
        if token == eos_token_id:
            break
    return new


def generate_cached(decoder, input_ids, max_new_tokens, eos_token_id=None, on_token=None):
    _check_args(input_ids, max_new_tokens, eos_token_id)
    new = []
    logits, kv = decoder.prefill(input_ids)
    for i in range(max_new_tokens):
        token = int(logits[0, -1].argmax())
        new.append(token)
        if on_token:
            on_token(token)
        if token == eos_token_id or i == max_new_tokens - 1:
            break
        logits, kv = decoder.decode(torch.tensor([[token]]), kv)
    return new


def latency_metrics(arrival_time, token_times):
    if type(arrival_time) not in (int, float) or not math.isfinite(arrival_time) or arrival_time < 0:
        raise ValueError(f"`arrival_time` must be a finite time >= 0 (got {arrival_time}).")
    if type(token_times) not in (list, tuple) or len(token_times) == 0:
        raise ValueError(f"`token_times` must be a non-empty list of times, got {token_times!r}.")
    bad = [t for t in token_times if type(t) not in (int, float) or not math.isfinite(t)]
    if bad:
        raise ValueError(f"`token_times` must hold finite times, got {list(token_times)}.")
    previous = arrival_time
    for t in token_times:
        if t < previous:
            raise ValueError(f"`token_times` must not go back in time (nor start before arrival), "
                             f"got {list(token_times)}.")
        previous = t
    n = len(token_times)
    return {"ttft": float(token_times[0] - arrival_time),
            "tpot": None if n == 1 else float(token_times[-1] - token_times[0]) / (n - 1),
            "e2e": float(token_times[-1] - arrival_time)}


def serve_request(decoder, input_ids, max_new_tokens, *, arrival_time, clock, eos_token_id=None):
    now = clock()
    if type(arrival_time) not in (int, float) or arrival_time > now:
        raise ValueError(f"`arrival_time` must be <= clock() = {now} (got {arrival_time}).")
    times = []
    tokens = generate_cached(decoder, input_ids, max_new_tokens, eos_token_id, lambda t: times.append(clock()))
    return {"tokens": tokens, "token_times": times, **latency_metrics(arrival_time, times)}


def quality_score(completions, quality_set):
    import json

    import jsonschema

    if type(quality_set) is not dict or not quality_set.get("items"):
        raise ValueError(f"`quality_set` must hold at least one item, got {quality_set!r}.")
    items = quality_set["items"]
    prompts = [items[i]["prompt"] for i in range(len(items))]
    if type(completions) is not dict:
        raise ValueError(f"`completions` must be a dict of prompt -> text, got {completions!r}.")
    if sorted(completions) != sorted(prompts):
        raise ValueError(f"`completions` must hold exactly the set's prompts, got {sorted(completions)} "
                         f"for {sorted(prompts)}.")
    if any(type(completions[p]) is not str for p in prompts):
        raise ValueError(f"`completions` must map every prompt to a str, got {completions!r}.")
    validator = jsonschema.Draft202012Validator(quality_set["schema"])
    exact, passing = [], 0
    for i in range(len(items)):
        try:
            value = json.loads(completions[prompts[i]])
        except ValueError:
            continue
        passing += 1 if validator.is_valid(value) else 0
        if value == items[i]["expected"]:
            exact.append(prompts[i])
    return {"n": len(items), "exact": len(exact) / len(items), "schema_pass": passing / len(items),
            "exact_prompts": exact}


def regressed(baseline, candidate, *, tolerance):
    if type(tolerance) not in (int, float) or not 0 <= tolerance <= 1:
        raise ValueError(f"`tolerance` must be in [0, 1], got {tolerance}.")
    for label, score in zip(["baseline", "candidate"], [baseline, candidate]):
        missing = [k for k in ["n", "exact", "schema_pass", "exact_prompts"] if type(score) is not dict or k not in score]
        if missing:
            raise ValueError(f"`{label}` lacks the score keys {missing}: got {score!r}.")
    if candidate["n"] != baseline["n"]:
        raise ValueError(f"`candidate` has n = {candidate['n']}, the baseline {baseline['n']}: got {candidate!r}.")
    keys = ["exact", "schema_pass"]
    dropped = [keys[i] for i in range(2) if baseline[keys[i]] - candidate[keys[i]] > tolerance]
    lost = [p for p in baseline["exact_prompts"] if p not in candidate["exact_prompts"]]
    return len(dropped) > 0, f"dropped beyond {tolerance}: {dropped}; no longer exact: {lost}"
