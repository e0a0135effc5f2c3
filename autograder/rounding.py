"""The rounding budget: how far two correct float32 computations of one value may differ.

A grader compares a float that the student's process computed with one the grading
process computed or kept. The two may run on different CPU kernels (torch picks its
vectorised kernels by instruction set; MKL its matrix products), on a different number of
threads, in a different batch shape, or on a machine that wrote a kept file months ago.
Each of those reorders float32 sums, so the last bits move. A tolerance must cover that
and nothing more: autograder/graders/README.md has the table of every tolerance, the
error it covers, the largest difference measured and the margin left.

    python -m autograder.rounding [--threads N]

measures, in this process's kernels, the two model-derived differences the course can
produce (the kept logits against a fresh computation, and lab07's batched rows against
each request's solo run) and prints them as JSON with the tolerance each must stay under;
exit status 1 when one is over. tests/test_cpu_kernels.py runs it under every CPU kernel
set this machine has.
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager

# Tiny-model logits compared across kernels, threads, batch shapes and machines: |logit| <= 20,
# where one float32 ulp is 1.9e-6. Measured worst: 6.7e-6 for a kept value recomputed on other
# kernels, 1.2e-5 for a row computed in a batch of four against the same row alone (README table).
# The smallest real bug in view, keys and values rounded to float16 on their way into the cache,
# moves them by 1.4e-3 with every token unchanged (autograder/variants/lab05/bug_append_rounds_to_half.py).
LOGIT_ATOL = 1e-4

# A greedy step that a grader compares token by token must have its top-1 logit ahead of its
# top-2 by at least this much: 100 x LOGIT_ATOL, so no rounding within the budget can swap them
# (tests/test_near_ties.py walks every such step).
MIN_TOP_GAP = 1e-2

# The CPU kernel sets torch can be told to use, lowest first (ATEN_CPU_CAPABILITY on x86-64).
X86_CAPABILITIES = ("default", "avx2", "avx512")


def capabilities() -> list[str]:
    """The values of ATEN_CPU_CAPABILITY this CPU can run: every x86 level up to the one torch
    picked, or "default" and the picked one elsewhere (ARM)."""
    import torch
    best = torch.backends.cpu.get_cpu_capability().lower()
    if best in X86_CAPABILITIES:
        return list(X86_CAPABILITIES[:X86_CAPABILITIES.index(best) + 1])
    return ["default"] if best == "default" else ["default", best]


def difference(a, b) -> float:
    """The largest |a - b| over two nested values of the same structure: tensors of one dtype
    and shape compared within floats, everything else (token ids, sizes, strings) exactly.
    inf where the structure, a dtype, a shape or an exact value differs."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype != b.dtype \
                or a.shape != b.shape:
            return float("inf")
        if not a.is_floating_point():
            return 0.0 if torch.equal(a, b) else float("inf")
        if a.numel() == 0:
            return 0.0
        d = (a.double() - b.double()).abs()
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))          # equal infinities, NaN == NaN
        return float(torch.where(same, torch.zeros_like(d), d.nan_to_num(nan=float("inf"))).max())
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return float("inf")
        return max((difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return float("inf")
        return max((difference(x, y) for x, y in zip(a, b)), default=0.0)
    return 0.0 if type(a) is type(b) and a == b else float("inf")


@contextmanager
def threads(n: int | None):
    """Run what the graders run on one thread (autograder.checks.one_thread) on `n` threads
    instead, to see whether the thread count moves a value; None leaves one_thread alone."""
    if n is None:
        yield
        return
    import torch
    from unittest import mock

    from autograder import checks

    @contextmanager
    def n_threads():
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)
    with mock.patch.object(checks, "one_thread", n_threads):
        yield


def kept_logits() -> dict:
    """{lab/key: largest difference} between each value kept in autograder/graders/labNN/_expected.pt
    and the same value computed now (inf for a lab whose file is stale: it is not compared)."""
    from autograder import memo
    out = {}
    for lab in memo.labs():
        stored = memo._stored(lab)
        for key, value in memo.compute_all(lab).items():
            out[f"{lab}/{key}"] = float("inf") if stored is None or key not in stored else difference(stored[key], value)
    return out


def batched_rows() -> dict:
    """{request: largest difference} between the logits rows the course's engine computed for each
    request of lab07's tiny-model trace (four requests batched together) and that request's solo run
    (inf where its tokens differ)."""
    import torch

    from autograder.checks import one_thread
    from autograder.graders.lab07._inputs import TRACES, run_trace
    from autograder.graders.lab07._tiny import tiny_model, tiny_prompts, tiny_tokenizer
    from course.batched import solo_greedy
    from course.engine import Engine

    with one_thread():
        run = run_trace(Engine, **TRACES["tiny"])
        eos = int(tiny_tokenizer().eos_token_id)
        out = {}
        for name, prompt in tiny_prompts().items():
            tokens, rows = solo_greedy(tiny_model(), prompt, 10, eos)
            got = run["logits"][name][:len(rows)]
            out[name] = difference(torch.tensor(got), torch.stack(rows)) if len(got) == len(rows) else float("inf")
    return out


# lab01's and lab02's tolerances on probabilities, log-probabilities and entropies:
# name -> (atol, rtol), as the graders apply them (autograder/graders/lab01, lab02/judging.py)
FORMULA_TOLERANCES = {"softmax": (1e-6, 1e-5), "log_softmax": (1e-5, 1e-5), "entropy": (1e-5, 1e-5)}


def logit_fixtures() -> dict:
    """{name: (steps, V) float32 logits} of every logit fixture (the course's other fixtures,
    allocator operations and traces, have another schema and are left out)."""
    import json

    from course import fixtures
    out = {}
    for name in fixtures.available():
        raw = json.loads((fixtures.FIXTURES_DIR / f"{name}.json").read_text(encoding="utf-8"))
        if raw.get("schema_version") == fixtures.SCHEMA_VERSION:
            out[name] = fixtures.load(name).logits()
    return out


def _rows():
    """Every finite-or-masked logits row of the course's fixtures, and each shifted by +1000 and
    scaled by 1000 (lab01's stability probes), as float32 (V,) tensors."""
    import torch

    rows = []
    for logits in logit_fixtures().values():
        for row in logits:
            if torch.isnan(row).any() or torch.isposinf(row).any():
                continue                     # the error and +inf cases have exact answers, no rounding
            rows += [row, row + 1000, row * 1000]
    return rows


def formulas() -> dict:
    """{function: worst |other - reference| / (atol + rtol * |reference|)} over _rows(), for
    correct float32 formulations other than the reference's (below 1: within the grader's
    tolerance; its inverse is the margin)."""
    import torch

    from autograder.reference import lab01 as ref

    def ratio(got, want, atol, rtol):
        same = (got == want) | (torch.isnan(got) & torch.isnan(want))
        d = ((got.double() - want.double()).abs() / (atol + rtol * want.double().abs()))
        return float(torch.where(same, torch.zeros_like(d), d).max())

    def masked_exp_log(p):
        return torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), torch.zeros_like(p))

    # The contracts fix the shift by the row maximum first (the notebooks' docstrings): what varies
    # is how the shifted row s is exponentiated, summed and normalised. (exp(x - logsumexp(x)) on
    # the unshifted row is outside the contract: its exponent carries a rounding of ulp(|x|), a
    # relative 6e-5 at |x| = 1000 and 1e-3 at 1e4.)
    def s(x):
        return x - x.max()

    others = {
        "softmax": [lambda x: torch.softmax(x, -1),
                    lambda x: torch.exp(s(x)) / torch.exp(s(x)).double().sum().float(),
                    lambda x: torch.exp(torch.log_softmax(x, -1)),
                    lambda x: torch.exp(s(x) - torch.logsumexp(s(x), -1))],
        "log_softmax": [lambda x: torch.log_softmax(x, -1),
                        lambda x: s(x) - torch.logsumexp(s(x), -1),
                        lambda x: s(x) - torch.log(torch.exp(s(x)).double().sum()).float()],
        "entropy": [lambda p: -torch.special.xlogy(p, p).sum(-1),
                    lambda p: -(masked_exp_log(p).double().sum(-1)).float(),
                    lambda p: -(torch.where(p > 0, p * torch.log2(torch.where(p > 0, p, 1.0)), 0.0)).sum(-1)
                    * torch.log(torch.tensor(2.0))]}
    out = {}
    for fn, alternatives in others.items():
        atol, rtol = FORMULA_TOLERANCES[fn]
        worst = 0.0
        for x in _rows():
            arg = ref.softmax(x) if fn == "entropy" else x
            want = getattr(ref, fn)(arg)
            worst = max([worst, *(ratio(alt(arg), want, atol, rtol) for alt in alternatives)])
        out[fn] = worst
    return out


def measure(n_threads: int | None = None) -> dict:
    """What this process's kernels give: the capability torch uses, the thread count, and each
    measured difference with the tolerance it must stay under."""
    import torch
    with threads(n_threads):
        kept, batched, by_formula = kept_logits(), batched_rows(), formulas()
    return {"capability": torch.backends.cpu.get_cpu_capability(), "threads": n_threads or 1,
            "tolerance": LOGIT_ATOL, "kept_logits": kept, "batched_rows": batched,
            "worst": max([*kept.values(), *batched.values()]),
            "formulas_over_tolerance": by_formula}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.rounding",
                                 description="Measure the model-derived float differences the graders compare "
                                             "(kept logits against a fresh computation, lab07's batched rows against "
                                             "each solo run) in this process's CPU kernels; exit 1 when one is over "
                                             "its tolerance.")
    ap.add_argument("--threads", type=int, default=None, metavar="N",
                    help="torch threads while computing (default: one, as the graders run)")
    args = ap.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads must be at least 1, got {args.threads}")
    result = measure(args.threads)
    print(json.dumps(result, indent=1))
    within = result["worst"] <= result["tolerance"] and max(result["formulas_over_tolerance"].values()) <= 1
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
