"""Mutation score of the graders: how many small bugs planted in a lab's reference the
hidden cases notice.

    python -m autograder.mutation lab04 [lab01 ...] [--keep]      (or: make mutation LAB=lab04)
    python -m autograder.mutation lab04 --from /tmp/mutation-lab04-…  (the report again, after triage)

mutmut (2.x) does the whole run with its own runner. It plants one small change at a time
(an operator, a constant, a comparison, `and`/`or`, a return value) in the files that
compute the judges' expected values (autograder/reference/labNN.py and the course modules
a reference takes its functions from: see TARGETS), and runs the lab's grader tests
against the solution notebook as the test command:

    python -m pytest autograder/graders/labNN --reference -x --timeout 30 -p autograder.mutation ...

A mutant is *killed* when any test fails (the judges then expect something the correct
solution does not do) or when the run goes past mutmut's limit (ten times the unmutated
run: a planted endless loop; pytest-timeout fails a single test after 30 s first). A
surviving mutant is a behaviour no case pins down, or an equivalent mutation; every
survivor is listed with its diff and its triage (EQUIVALENT, GAPS).

A mutant stands for a wrong expected value, so only the judges' side sees it: when a class
is graded, the student's process runs the course unmutated. A pre-pass gathers the solution's
observations once, unmutated (`--reference-observations`), and each mutant's run judges
those. (Probing the solution with the mutant in place would hide a mutant in code both sides
run, such as lab03's samplers: it would change the student's run and the expected one alike.)
The test command is served by autograder/mutation_fork.py, which imports torch and pytest
once and forks a fresh pytest per mutant that imports the course, mutant included, from
disk. mutmut's own timing run probes the solution, so its time limit (ten times that run)
is generous for a run that only judges.

mutmut writes each mutant into the file itself, so a run never touches this working tree:
the files git knows here (tracked and untracked, not ignored) are copied to a temporary
folder, mutmut runs there with this interpreter, and only the report comes back:
benchmarks/results/mutation_labNN.json. A lab takes minutes to tens of minutes; not part of
`make test`.

Loaded into that pytest run (`-p autograder.mutation`) this module also makes every
non-zero pytest exit count as a kill (mutmut reads only exit code 1 as one, but a mutant
that breaks an import ends the run with 2, 3 or 4) and writes which test failed first.
As mutmut's `mutmut_config` (a one-line file in the copy) its `pre_mutation` skips the
mutants outside SCOPE and those that do not parse, so the counts match the judges' reach.
Lines marked `# pragma: no mutate` get no mutants: the references' error messages, which
no judge compares (a judge checks the *student's* message; the reference only has to raise).
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
TEST_TIMEOUT_S = 30          # pytest-timeout, per test (the unmutated tests take well under 1 s each)
LOG_ENV, MUTANT_ENV, LAB_ENV = "L2FT_MUTATION_LOG", "L2FT_MUTANT", "L2FT_MUTATION_LAB"
PREPASS_ENV = "L2FT_MUTATION_PREPASS"
OBSERVATIONS, SOCKET = ".observations.pkl", ".fork.sock"      # in the run's private copy

# What to mutate per lab: the reference, and the course modules whose functions the
# judges compute expected values with (a reference re-exports them, or is them).
TARGETS = {
    "lab00": ["autograder.reference.lab00"],
    "lab01": ["autograder.reference.lab01"],
    "lab02": ["course.sampling"],
    "lab03": ["course.generation", "course.runs", "autograder.reference.lab03"],
    "lab04": ["autograder.reference.lab04"],
    "lab05": ["autograder.reference.lab05", "course.paged_kv"],
    "lab06": ["autograder.reference.lab06", "course.tracing"],
    "lab07": ["autograder.reference.lab07", "course.engine", "course.batched"],
}
# labs `make mutation` leaves out unless named (none: every lab meets the bars)
NOT_BY_DEFAULT: tuple[str, ...] = ()
# In a course module only the functions the judges compute expected values with count;
# the rest of the module (e.g. course.generation's TextStream: lab03's stream judges use
# an independent oracle, reference.safe_emissions) is not what a hidden case checks.
# Mutants elsewhere in the module are skipped ("out of scope"), not counted.
SCOPE = {
    "course.generation": ("validate_params", "first_stop", "holdback_length", "_check_input_ids", "_steps",
                          "_start", "generate"),
    # lab07's judges rerun each trace on course.engine.Engine (in scope whole) and take each
    # request's solo run from solo_greedy; the rest of course.batched is the world both engines
    # run in (the scripted and cost models, the batched decoder, the request types), an input
    # like a fixture, not an expected value
    "course.batched": ("solo_greedy",),
    # lab05's judges compute with the formula, blocks_needed, requests_that_fit and the allocator, pool and cache
    # classes; the module's ANSWERS_FOR (which lab's answers it holds, read by the sandbox) is no expected value
    "course.paged_kv": ("kv_bytes_per_token", "blocks_needed", "requests_that_fit", "OutOfBlocks", "BlockAllocator",
                        "KVPool", "PagedKVCache"),
    # course.runs is lab03's scaffolding; of it only the samplers compute what judges expect
    "course.runs": ("greedy_sampler", "seeded_sampler"),
    # lab02's judges take top-k/top-p from course.sampling and its argument checks (through
    # reference_rejects); the pipeline is judged against transformers' warpers and sampling
    # by chi-square against softmax, independent oracles, so those functions are out of scope
    "course.sampling": ("_is_number", "check_logits", "check_temperature", "check_top_k", "check_top_p",
                        "check_min_tokens_to_keep", "top_k_filter", "top_p_filter"),
    # lab06's judges compute with the replay (reference.expected_spans -> spans_from_events and
    # its recorder), the metrics, percentiles, grouping, diagnosis, record and export; the
    # live RequestTracer and counters_from_events serve lab07 and the notebook, not a judge
    "course.tracing": ("to_ns", "_attr_value_ok", "_check_attributes", "_finish_name", "_Request", "_Recorder",
                       "spans_from_events", "_is_root", "group_by_request", "_root_of", "request_metrics",
                       "_values", "percentile", "_check_boundaries", "bucket_index", "bucket_counts",
                       "histogram_percentile", "group_percentiles", "_median", "_share", "first_deviation",
                       "trace_record", "_us", "_plain", "to_chrome_trace"),
}
# Methods of an in-scope class that no judge of the lab computes with (skipped, as above).
SCOPE_EXCLUDE = {
    # KVPool.for_decoder, bytes_total and cache_factory and PagedKVCache.share_prefix serve lab07's
    # engine, the notebook's demos and prefix sharing (tests/test_paged_kv.py tests them); no lab05
    # judge or reference calls them
    "course.paged_kv": ("KVPool.for_decoder", "KVPool.bytes_total", "KVPool.cache_factory",
                        "PagedKVCache.share_prefix"),
}
# Survivors read and judged equivalent (no correct solution can behave differently), keyed
# by (module, the mutated line as mutmut writes it, stripped): the reason.
EQUIVALENT = {
    ("autograder.reference.lab01",
     'got = f"XXshape {tuple(logits.shape)}, dtype {logits.dtype}XX" if isinstance(logits, torch.Tensor) \\'):
        "error-message text (`got` is only shown in the message)",
    ("autograder.reference.lab01", "got = None"): "error-message text (`got` is only shown in the message)",
    ("autograder.reference.lab01", "if ((probs.sum(dim=-1) - 1).abs() >= 1e-4).any():"):
        "the boundary of the tolerance: 'sum to 1 within 1e-4' allows either reading at exactly 1e-4",
    ("autograder.reference.lab01",
     "plogp = torch.where(probs >= 0, probs * torch.log(torch.where(probs > 0, probs, 1.0)), 0.0)"):
        "at p == 0 both branches give 0 (p * log(1.0))",
    ("autograder.reference.lab01",
     "plogp = torch.where(probs > 0, probs * torch.log(torch.where(probs >= 0, probs, 1.0)), 0.0)"):
        "the inner guard only matters where the outer torch.where already picks 0.0",
    ("autograder.reference.lab01",
     "plogp = torch.where(probs > 0, probs * torch.log(torch.where(probs > 0, probs, 2.0)), 0.0)"):
        "the placeholder is used only where the outer torch.where already picks 0.0",
    ("autograder.reference.lab01",
     "if isinstance(token_id, bool) and not isinstance(token_id, int) or not 0 <= token_id < logits.shape[0]:"):
        "the reference still rejects token_id=True, the one bool a case passes it (with ValueError, all "
        "reference_rejects asks): past the check, softmax(...)[True] is a boolean index, a (1, V) tensor, and "
        "float() of it raises ValueError; the student's side of that case is judged on its own",
    ("autograder.reference.lab01", "best_t, best_p = None, -2.0"):
        "any start below 0 is beaten by the first probability (probabilities are >= 0)",
    ("autograder.reference.lab01", 'return {"temperature": best_t, "XXprobabilityXX": best_p}'):
        "the judges take only the temperature from the reference; they check the student's keys against the "
        "contract and the probability against softmax",
    ("course.sampling", 'got = (f"XXshape {tuple(logits.shape)}, dtype {logits.dtype}XX" if isinstance(logits, '
                        'torch.Tensor)'): "error-message text (`got` is only shown in the message)",
    ("course.sampling", "got = None"): "error-message text (`got` is only shown in the message)",
    ("course.sampling", 'raise ValueError(f"`{name}` must not contain NaN, got NaN at '
                        '{torch.isnan(logits).nonzero().tolist()[:6]}.")'): "error-message text (how many positions it shows)",
    # lab02's contract asks filters for (V,) or (B, V) float logits and never asks a student to
    # reject other logits: these lines run only on inputs outside it, where no case can look
    ("course.sampling", "if not isinstance(logits, torch.Tensor) and logits.dim() not in (1, 2) or not "
                        "logits.is_floating_point():"):
        "differs only for a non-tensor or a 3-D tensor, logits lab02's contract never passes or asks to reject",
    **{("course.sampling", line): "`rows` feeds only the message for a row of all -inf, logits lab02's "
                                  "contract never passes or asks to reject"
       for line in ("rows = dead.reshape(+1).nonzero().flatten().tolist()",
                    "rows = dead.reshape(-2).nonzero().flatten().tolist()", "rows = None")},
    # lab03
    ("course.generation", "if i >= 0 and (best is None or (i + len(s), i) <= (best[1], best[0])):"):
        "equal (end, start) means the same match (the same string twice in `stop`): either keeps an equal tuple",
    ("course.generation", "if not isinstance(input_ids, torch.Tensor) and input_ids.dim() != 2 or "
                          "input_ids.shape[0] != 1:"):
        "differs only for input_ids that are not a tensor, which lab03's contract never passes or asks to reject",
    ("course.generation", "got = None"): "error-message text (`got` is only shown in the message)",
    ("course.generation", 'start = clock() if p["deadline"] is not None else 1.0'):
        "`start` is read only when there is a deadline",
    ("autograder.reference.lab03", "def expected_run(spec: dict, clock_start: float = 1.0) -> dict:"):
        "the deadline counts from generate's start, so where the clock starts changes no result",
    ("autograder.reference.lab03", "for k in range(len(tokens) + 2):"):
        "one more entry past the last index a stream judge reads (at most the number of tokens)",
    ("course.sampling", 'f"{torch.isposinf(logits).nonzero().tolist()[:6]}.")'):
        "error-message text (how many positions it shows)",
    ("course.sampling", 'raise ValueError(f"`{name}` must keep at least one finite logit per row, got all -inf in '
                        'rows {rows[:6]}.")'): "error-message text (how many rows it shows)",
    # lab06: the reference's helpers around the judges
    ("autograder.reference.lab06", 'spans_from_events(events, provider.get_tracer("XXreferenceXX"))'):
        "the name of the reference's instrumentation scope; no judge reads it",
    ("autograder.reference.lab06", "@lru_cache(maxsize=2)"): "the cache holds the one schema validator either way",
    ("autograder.reference.lab06", "deleted: @lru_cache(maxsize=1)"):
        "without the cache each call builds the same schema validator again",
    ("autograder.reference.lab06", "errors = sorted(_validator().iter_errors(record), key=lambda e: None)"):
        "which of several schema errors the hint names first (every one of them is an error)",
    ("autograder.reference.lab06", 'where = "XX/XX".join(str(p) for p in e.path) or "(the record)"'):
        "error-message text (the separator of a nested path in the hint)",
    ("autograder.reference.lab06", 'where = "/".join(str(p) for p in e.path) or "XX(the record)XX"'):
        "error-message text (the hint's name for the record itself)",
    ("autograder.reference.lab06", 'return f"XX{where}: {e.message}XX"'): "error-message text (the hint's wording)",
    ("course.tracing", "self.arrival = None"): "_Request.arrival is never read (the recorder keeps `last`)",
    ("course.tracing", "req.stage_name = None"): "_Request.stage_name is never read (the open span itself is kept)",
    **{("course.tracing", line): "error-message text (which words say why a request id is not open)"
       for line in ('state = "XXhas already endedXX" if request_id in self.done else "was never started"',
                    'state = "has already ended" if request_id in self.done else "XXwas never startedXX"',
                    'state = "has already ended" if request_id not in self.done else "was never started"',
                    "state = None")},
    # lab06, the survivors of the first complete run, read against the notebook's docstrings and
    # the judges (autograder/graders/lab06): what no correct solution can be told apart by
    ("course.tracing",
     'req.stage.set_status(Status(StatusCode.ERROR, "XXthe request failed during this stageXX"))'):
        "the status description of the interrupted stage; the span dumps keep only the status code",
    ("course.tracing", 'if not isinstance(ev, dict) and ev.get("event") not in _EVENT_KINDS:'):
        "differs only for an event that is not a dict or whose kind is not one of the five; lab06's contract "
        "lists the kinds, asks no error for others, and no case passes one",
    ("course.tracing", "if not isinstance(model, str) and not model:"):
        "differs only for an arrive whose gen_ai.request.model is an empty string or a non-string, which the "
        "contract rules out (the arrive attributes include the model) and no case passes",
    ("course.tracing", 'xs = _values("XXvaluesXX", values)'):
        "error-message text (the parameter name in the reference's message; a judge checks the student's)",
    ("course.tracing", "if h < 1:"):
        "at h == 1 the interpolation gives xs[0] + 0 * (xs[1] - xs[0]) = xs[0], the same smallest value "
        "(only neighbours whose difference overflows a float, near 1.8e308, could tell)",
    ("course.tracing", 'check_number("q", q, 0, 101)'):
        "histogram_percentile: differs only for q in (100, 101], outside the contract's [0, 100]; the "
        "contract asks no error for q (only for bucket_counts), so no case can pass one",
    ("course.tracing", "if i == 0 and edges[0] < 0:"):
        "at edges[0] == 0 the interpolation from 0 to 0 gives 0.0 too",
    **{("course.tracing", line): "unreachable: rank = q / 100 * total never exceeds the total (q <= 100), so "
                                 "the last non-empty bucket always returns first"
       for line in ("return float(edges[+1])  # unreachable: the last non-empty bucket always reaches the rank",
                    "return float(edges[-2])  # unreachable: the last non-empty bucket always reaches the rank")},
    ("course.tracing", 'check_number(f"qs[{i}]", q, 0, 101)'):
        "group_percentiles: differs only for a q in (100, 101], outside percentile's [0, 100]; the contract "
        "asks no error for qs, and the reference still raises (through percentile) once a group holds a value",
    ("course.tracing", "if not isinstance(row, dict) and by not in row or metric not in row:"):
        "differs only for a row that is not a dict or lacks `by` (KeyError instead of ValueError), rows the "
        "contract rules out and asks no error for",
    ("course.tracing", 'check_number("threshold", threshold, 0, lo_open=False)'):
        "differs only at threshold == 0, which the contract neither rejects nor judges (every case uses 0.25)",
    ("course.tracing", 'reasons = a.get("gen_ai.response.finish_reasons") or ("XXXX",)'):
        "the fallback for a root without gen_ai.response.finish_reasons: every ended request has them, no "
        "case builds one without, and the schema's enum admits neither the reference's \"\" nor the mutant's text",
    **{("course.tracing", line): "the process_name metadata event: the contract does not ask for it and no "
                                 "judge reads it (tracks are named by thread_name events)"
       for line in ('events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 2, "tid": 0, '
                    '"args": {"name": "requests"}}]',
                    'events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 1, '
                    '"args": {"name": "requests"}}]')},
    ("course.tracing",
     "group = sorted(by_request[rid], key=lambda s: (s.start_time, 0 if _is_root(s) else 2, -s.end_time))"):
        "stages sort after their root with key 2 exactly as with 1 (the root keeps 0)",
    ("course.tracing",
     "group = sorted(by_request[rid], key=lambda s: (s.start_time, 0 if _is_root(s) else 1, +s.end_time))"):
        "changes only the order of two stages that start together (a zero-length stage and the next); the "
        "contract orders only a root before its children",
    # lab06's export and root attributes: strings the text rule (is_message_mutant) takes for messages
    ("course.tracing", '"XXgen_ai.request.modelXX": model, "course.request_id": request_id}'):
        "an extra root attribute: the arrive attributes (which must hold gen_ai.request.model) still set the "
        "real key, and the judges read the contract's keys only",
    **{("course.tracing", 'events: list[dict] = [{' + body + '}]'):
       "the process_name metadata event: the contract does not ask for it and no judge reads it"
       for body in ('"XXnameXX": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "requests"}',
                    '"name": "XXprocess_nameXX", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "requests"}',
                    '"name": "process_name", "XXphXX": "M", "pid": 1, "tid": 0, "args": {"name": "requests"}',
                    '"name": "process_name", "ph": "XXMXX", "pid": 1, "tid": 0, "args": {"name": "requests"}',
                    '"name": "process_name", "ph": "M", "XXpidXX": 1, "tid": 0, "args": {"name": "requests"}',
                    '"name": "process_name", "ph": "M", "pid": 1, "XXtidXX": 0, "args": {"name": "requests"}',
                    '"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "XXargsXX": {"name": "requests"}',
                    '"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"XXnameXX": "requests"}',
                    '"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "XXrequestsXX"}')},
    **{("course.tracing", line): "the \"cat\" of an exported event, which the contract does not name and no "
                                 "judge reads"
       for line in ('events.append({"name": s.name, "XXcatXX": "request" if _is_root(s) else "stage", "ph": "X",',
                    'events.append({"name": s.name, "cat": "XXrequestXX" if _is_root(s) else "stage", "ph": "X",',
                    'events.append({"name": s.name, "cat": "request" if _is_root(s) else "XXstageXX", "ph": "X",',
                    'events.append({"name": e.name, "XXcatXX": "token", "ph": "i", "s": "t", "ts": _us(e.timestamp),',
                    'events.append({"name": e.name, "cat": "XXtokenXX", "ph": "i", "s": "t", "ts": _us(e.timestamp),')},
    **{("course.tracing", line): "the token instant's scope \"s\" (thread, the format's default), which the "
                                 "contract does not name and no judge reads"
       for line in ('events.append({"name": e.name, "cat": "token", "ph": "i", "XXsXX": "t", "ts": _us(e.timestamp),',
                    'events.append({"name": e.name, "cat": "token", "ph": "i", "s": "XXtXX", "ts": _us(e.timestamp),')},
    ("course.tracing", '"pid": 1, "tid": tid, "XXargsXX": {k: _plain(v) for k, v in e.attributes.items()}})'):
        "the token instant's args, which the contract does not ask for and no judge reads",
    # lab04
    ("autograder.reference.lab04", "got = None"):
        "error-message text (`got` is only shown in the message)",
    ("autograder.reference.lab04", "diff = (a - b).abs().amax(dim=+1)                         # (T,)"):
        "a and b are (T, V) (the model's logits of one prompt): dim=+1 is dim=-1",
    ("autograder.reference.lab04", "lost = [p for p in baseline[\"exact_prompts\"] if p  in candidate[\"exact_prompts\"]]"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "lost = None"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "parts = [f\"XX{m} fell from {baseline[m]:.4f} to {candidate[m]:.4f}, more than the tolerance {tolerance:g}XX\""):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "for m in dropped] or [f\"XXevery rate within {tolerance:g} of the baselineXX\"]"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "for m in dropped] and [f\"every rate within {tolerance:g} of the baseline\"]"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "parts.append(\"XXno longer exact: XX\" + \", \".join(repr(p) for p in lost))"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "parts.append(\"no longer exact: \" + \"XX, XX\".join(repr(p) for p in lost))"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
    ("autograder.reference.lab04", "return bool(dropped), \"XX; XX\".join(parts)"):
        "regressed's reason: the judges take only the decision from the reference and check the student's reason against the scores themselves (the rates that fell, the prompts lost)",
}
# Survivors read and found to be real gaps (a clause no hidden case exercises), keyed like
# EQUIVALENT: what a case would have to do to kill them.
GAPS = {
    # labs 05-07's survivors are triaged in autograder/mutation_triage/labNN.py
}


def _merge_triage() -> None:
    """Add the per-lab triage files (autograder/mutation_triage/labNN.py) to EQUIVALENT and GAPS."""
    import importlib
    for lab in ("lab05", "lab06", "lab07"):
        mod = importlib.import_module(f"autograder.mutation_triage.{lab}")
        for name, table in (("EQUIVALENT", EQUIVALENT), ("GAPS", GAPS)):
            clash = set(getattr(mod, name)) & (set(EQUIVALENT) | set(GAPS))
            if clash:
                raise RuntimeError(f"{lab}'s triage repeats a key already triaged: {sorted(clash)[:3]}")
            table.update(getattr(mod, name))


_merge_triage()


# ---------------------------------------------------------------- the pytest side (-p autograder.mutation)

def _log(entry: dict) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"mutant": os.environ.get(MUTANT_ENV, "baseline"), **entry}) + "\n")


_FIRST_FAILURE: list[str] = []
# (rfc3987_syntax, which costs jsonschema seconds at import, is hidden by autograder/__init__.py)


def pytest_runtest_logreport(report):
    if report.failed and not _FIRST_FAILURE:
        _FIRST_FAILURE.append(report.nodeid.split("::", 1)[-1])


def pytest_collectreport(report):
    if report.failed and not _FIRST_FAILURE:
        _FIRST_FAILURE.append(f"collecting {report.nodeid}")


def pytest_configure(config):
    # A mutant is judged on the solution's observations from the pre-pass (PREPASS_ENV, which
    # writes them): in grading, the student's process runs the course unmutated, so only the
    # judges' side may see the mutant. mutmut's timing run (no mutant) probes the solution
    # again, so its time limit, ten times that run, is generous.
    if not os.environ.get(PREPASS_ENV) and not os.environ.get(MUTANT_ENV):
        config.option.reference_observations = None


def pytest_sessionfinish(session, exitstatus):
    _log({"exit": int(exitstatus), "failed": _FIRST_FAILURE[0] if _FIRST_FAILURE else None})
    if int(exitstatus) != 0:
        session.exitstatus = 1       # mutmut counts only exit code 1 as a kill


# ---------------------------------------------------------------- the mutmut side (mutmut_config)

def module_file(module: str) -> str:
    """`course.sampling` -> `course/sampling.py` (relative to the repository root)."""
    return module.replace(".", "/") + ".py"


def scope_lines(module: str, source: str) -> set[int] | None:
    """1-based line numbers of the top-level functions and classes SCOPE names for `module`, less
    the methods SCOPE_EXCLUDE names (None: all)."""
    names = SCOPE.get(module)
    if names is None:
        return None
    excluded = SCOPE_EXCLUDE.get(module, ())
    lines, dropped = set(), set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            lines |= set(range(node.lineno, node.end_lineno + 1))
            for item in node.body if isinstance(node, ast.ClassDef) else ():
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and f"{node.name}.{item.name}" in excluded:
                    first = min([item.lineno, *(d.lineno for d in item.decorator_list)])
                    dropped |= set(range(first, item.end_lineno + 1))
    return lines - dropped


def skip_reason(module: str, source: str, mutation_id) -> str | None:
    """Why a mutant is not counted: outside SCOPE, or mutmut's change does not parse
    (e.g. `**` -> `*` in a dict); None when it is."""
    from mutmut import Context, mutate
    scope = scope_lines(module, source)
    if scope is not None and mutation_id.line_number + 1 not in scope:
        return "out of scope"
    mutated, _ = mutate(Context(source=source, mutation_id=mutation_id, filename=module_file(module)))
    try:
        compile(mutated, module_file(module), "exec")
    except SyntaxError:
        return "does not parse"
    return None


_SOURCES: dict[str, str] = {}


def pre_mutation(context) -> None:
    """mutmut's hook, before each mutant is written: skip it, or name it for the log."""
    filename = context.filename
    module = filename[:-3].replace(os.sep, ".").replace("/", ".")
    if filename not in _SOURCES:
        _SOURCES[filename] = Path(filename).read_text(encoding="utf-8")
    if skip_reason(module, _SOURCES[filename], context.mutation_id) is not None:
        context.skip = True
        return
    os.environ[MUTANT_ENV] = mutant_key(filename, context.mutation_id.line_number, context.mutation_id.index)


def mutant_key(filename: str, line_number: int, index: int) -> str:
    return f"{filename}:{line_number}:{index}"


# ---------------------------------------------------------------- the driver

def runnable() -> list[str]:
    """The labs with TARGETS whose graders are a pytest package (autograder/graders/labNN/)."""
    return [lab for lab in sorted(TARGETS) if (ROOT / "autograder" / "graders" / lab / "__init__.py").is_file()]


def default_labs() -> list[str]:
    """What `make mutation` runs without LAB."""
    return [lab for lab in runnable() if lab not in NOT_BY_DEFAULT]


def grader_args(lab: str) -> list[str]:
    """The lab's graders on the solution notebook, stopping at the first failure, with only
    the plugins grading needs (pytest's own, pytest-timeout, the graders' conftest, this
    module); the others installed here cost seconds a start."""
    return [f"autograder/graders/{lab}", "--reference", "-x", "-q", "--timeout", str(TEST_TIMEOUT_S),
            "-p", "pytest_timeout", "-p", "no:cacheprovider", "-p", "autograder.mutation",
            "--reference-observations", OBSERVATIONS]


def runner(lab: str, python: str = sys.executable) -> str:
    """mutmut's test command: grader_args(lab), run by a child of the copy's fork server
    (autograder/mutation_fork.py: torch and pytest imported once, the course from disk)."""
    return (f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} autograder/mutation_fork.py run {SOCKET} -- "
            + shlex.join(grader_args(lab)))


def private_copy(dest: Path) -> Path:
    """Copy the files git knows here (tracked and untracked, not ignored) to `dest`."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if not src.is_file() and not src.is_symlink():
            continue  # deleted here, or a submodule
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name, follow_symlinks=False)
    (dest / "mutmut_config.py").write_text("from autograder.mutation import pre_mutation  # noqa: F401\n",
                                           encoding="utf-8")
    return dest


def _diff(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def is_message_mutant(diff: list[str]) -> bool:
    """A mutation of string text only (mutmut's "XX...XX"), on a line that builds an error
    message or a parameter name shown in one: equivalent, since judges compare the
    student's messages, never the reference's."""
    before = [d[1:] for d in diff if d.startswith("-")]
    after = [d[1:] for d in diff if d.startswith("+")]
    if len(before) != 1 or len(after) != 1 or "XX" not in after[0]:
        return False
    text = before[0]
    return "raise " in text or "Error(" in text or text.lstrip().startswith(("f\"", "\"")) \
        or "check_" in text or "_number(" in text or "name" in text


def _key(module: str, diff: list[str]) -> tuple[str, str] | None:
    """(module, the mutated line, stripped); for a mutant that only deletes a line (mutmut drops
    a decorator), (module, "deleted: " + that line)."""
    after = [d[1:].strip() for d in diff if d.startswith("+")]
    if not after:
        gone = [d[1:].strip() for d in diff if d.startswith("-") and d[1:].strip()]
        return (module, "deleted: " + gone[0]) if len(gone) == 1 else None
    return (module, after[0]) if len(after) == 1 else None


def equivalence(module: str, diff: list[str]) -> str | None:
    """Why a surviving mutant is equivalent, or None. A mutant read and triaged by hand (GAPS,
    EQUIVALENT) is judged by that reading, before the text rule: a string the rule takes for a
    message may be data the contract asks for (a key of an exported event)."""
    key = _key(module, diff)
    if key in GAPS:
        return None
    if key in EQUIVALENT:
        return EQUIVALENT[key]
    if is_message_mutant(diff):
        return "error-message text (judges never compare the reference's messages)"
    return None


def read_cache(copy: Path) -> list[tuple[str, int, int, str]]:
    """(file, 0-based line number, index, status) of every mutant in mutmut's cache."""
    db = sqlite3.connect(copy / ".mutmut-cache")
    try:
        return db.execute("SELECT s.filename, l.line_number, m.\"index\", m.status FROM Mutant m "
                          "JOIN Line l ON m.line = l.id JOIN SourceFile s ON l.sourcefile = s.id "
                          "ORDER BY s.filename, l.line_number, m.\"index\"").fetchall()
    finally:
        db.close()


def report(lab: str, copy: Path, seconds: float) -> dict:
    """The lab's report from mutmut's cache and the runner's log."""
    from mutmut import Context, RelativeMutationID, mutate

    log = {}
    log_path = copy / ".mutation-log.jsonl"
    if log_path.exists():
        for line in log_path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            log[entry["mutant"]] = entry
    modules = {module_file(m): m for m in TARGETS[lab]}
    originals = {f: (copy / f).read_text(encoding="utf-8") for f in modules}
    rows, skipped = [], {}
    for filename, line_number, index, status in read_cache(copy):
        module, source = modules[filename], originals[filename]
        mid = RelativeMutationID(source.splitlines()[line_number], index, line_number, filename=filename)
        if status == "skipped":
            reason = skip_reason(module, source, mid) or "skipped"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        mutated, _ = mutate(Context(source=source, mutation_id=mid, filename=filename))
        diff = _diff(source, mutated)
        entry = log.get(mutant_key(filename, line_number, index), {})
        if status == "bad_timeout":
            killed_by = "timeout (mutmut: 10x the unmutated run)"
        elif status in ("ok_killed", "ok_suspicious"):
            killed_by = entry.get("failed") or f"pytest exit {entry.get('exit', '?')}"
        elif status == "bad_survived":
            killed_by = None
        else:
            raise RuntimeError(f"{lab}: mutant {filename}:{line_number + 1} was not run (status {status!r})")
        row = {"module": module, "line": line_number + 1, "killed_by": killed_by, "diff": diff,
               "equivalent": None if killed_by else equivalence(module, diff)}
        if not killed_by and not row["equivalent"]:
            row["triage"] = GAPS.get(_key(module, diff), "not triaged yet")
        rows.append(row)
    killed = sum(1 for r in rows if r["killed_by"])
    equivalent = sum(1 for r in rows if r["equivalent"])
    counted = len(rows) - equivalent
    return {"lab": lab, "targets": TARGETS[lab], "runner": runner(lab, "python"),
            "mutants": len(rows), "killed": killed, "equivalent": equivalent, "survived": counted - killed,
            "timeouts": sum(1 for r in rows if (r["killed_by"] or "").startswith("timeout")),
            "not_counted": skipped,
            "score": round(killed / counted, 4) if counted else None,
            "raw_score": round(killed / len(rows), 4) if rows else None,
            "seconds": round(seconds, 1),
            "seconds_per_mutant": round(seconds / (len(rows) + 1), 1),   # + the unmutated run
            "survivors": [r for r in rows if not r["killed_by"] and not r["equivalent"]],
            "equivalents": [r for r in rows if r["equivalent"]], "mutants_detail": rows}


def _copy_env(lab: str, copy: Path) -> dict:
    """The environment every process of a run in `copy` gets (the copy first on the path)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(copy), LAB_ENV: lab,
           LOG_ENV: str(copy / ".mutation-log.jsonl")}
    env.pop(MUTANT_ENV, None)
    return env


def _prepass_and_server(lab: str, copy: Path, env: dict) -> subprocess.Popen:
    """The pre-pass (the solution's observations, gathered once for every mutant), then the
    copy's fork server, ready; the caller kills the server."""
    pre = subprocess.run([sys.executable, "-m", "pytest", *grader_args(lab)], cwd=copy,
                         env={**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                              PREPASS_ENV: "1"}, capture_output=True, text=True)
    if pre.returncode != 0 or not (copy / OBSERVATIONS).is_file():
        raise RuntimeError(f"{lab}: the solution fails its graders unmutated (exit {pre.returncode}):\n"
                           f"{pre.stdout[-3000:]}\n{pre.stderr[-3000:]}")
    server = subprocess.Popen([sys.executable, "autograder/mutation_fork.py", "serve", SOCKET], cwd=copy,
                              env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "ready":
        server.kill()
        server.wait()
        raise RuntimeError(f"{lab}: the fork server did not start")
    return server


def run_lab(lab: str, *, keep: bool = False, log=print) -> dict:
    """mutmut over the lab's TARGETS in a private copy of the repository; the report."""
    if lab not in TARGETS:
        raise ValueError(f"`lab` must be one of {', '.join(TARGETS)}, got {lab!r}.")
    if lab not in runnable():
        raise ValueError(f"{lab}'s graders are not a pytest package (autograder/graders/{lab}/) yet.")
    copy = private_copy(Path(tempfile.mkdtemp(prefix=f"mutation-{lab}-")))
    env = _copy_env(lab, copy)
    try:
        files = [module_file(m) for m in TARGETS[lab]]
        where = subprocess.run([sys.executable, "-c", "import importlib, sys; print(*(importlib.import_module(m)"
                                ".__file__ for m in sys.argv[1:]))", *TARGETS[lab]],
                               cwd=copy, env=env, check=True, capture_output=True, text=True).stdout.split()
        if [Path(w).resolve() for w in where] != [(copy / f).resolve() for f in files]:
            raise RuntimeError(f"the copy imports {where}, not its own {files}")
        server = _prepass_and_server(lab, copy, env)
        cmd = [sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", ",".join(files),
               "--tests-dir", f"autograder/graders/{lab}", "--runner", runner(lab),
               "--simple-output", "--no-progress"]
        log(f"{lab}: mutmut in {copy}\n  {shlex.join(cmd)}")
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
        finally:
            server.kill()
            server.wait()
        seconds = time.perf_counter() - start
        (copy / ".mutation-seconds").write_text(f"{seconds:.1f}\n", encoding="utf-8")
        if not (copy / ".mutmut-cache").exists() or "Failed to run" in done.stdout + done.stderr:
            raise RuntimeError(f"{lab}: mutmut did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return report(lab, copy, seconds)
    finally:
        if keep:
            log(f"  kept {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


def _find_mutant(source: str, filename: str, line: int, diff: list[str]):
    """The mutmut mutation of `source` whose diff is `diff`, searched on the lines holding the
    diff's old text (nearest to `line` first, as the file may have moved since the report);
    (mutated source, 1-based line) or None."""
    from mutmut import Context, RelativeMutationID, mutate
    lines = source.splitlines()
    old = [d[1:] for d in diff if d.startswith("-")]
    if not old:
        return None
    candidates = sorted((i for i, text in enumerate(lines) if text == old[0]), key=lambda i: abs(i + 1 - line))
    for i in candidates:
        for index in range(64):
            mid = RelativeMutationID(lines[i], index, i, filename=filename)
            mutated, count = mutate(Context(source=source, mutation_id=mid, filename=filename))
            if mutated == source and count <= index:
                break
            if _diff(source, mutated) == diff:
                return mutated, i + 1
    return None


def recheck(lab: str, *, log=print) -> dict:
    """Run only the survivors of the lab's last report (benchmarks/results/mutation_labNN.json)
    that the triage as it stands does not call equivalent, against the graders as they stand
    now, in a private copy with the same runner as a full run. For trying new cases: the
    official score comes only from a full run (`python -m autograder.mutation LAB`)."""
    prior = json.loads((OUT / f"mutation_{lab}.json").read_text(encoding="utf-8"))
    todo = [r for r in prior["survivors"] if not equivalence(r["module"], r["diff"])]
    copy = private_copy(Path(tempfile.mkdtemp(prefix=f"recheck-{lab}-")))
    env = {**_copy_env(lab, copy), "PYTHONDONTWRITEBYTECODE": "1"}
    out = {"lab": lab, "survivors_before": len(prior["survivors"]), "rechecked": len(todo), "killed": [],
           "survived": [], "not_found": []}
    try:
        server = _prepass_and_server(lab, copy, env)
        try:
            for row in todo:
                filename = module_file(row["module"])
                original = (copy / filename).read_text(encoding="utf-8")
                found = _find_mutant(original, filename, row["line"], row["diff"])
                if found is None:
                    out["not_found"].append(row)
                    log(f"  gone    {row['module']}:{row['line']}: {' / '.join(row['diff'])}")
                    continue
                mutated, line = found
                (copy / filename).write_text(mutated, encoding="utf-8")
                try:
                    run = subprocess.run(runner(lab), shell=True, cwd=copy, env=env, capture_output=True,
                                         text=True, timeout=600)
                finally:
                    (copy / filename).write_text(original, encoding="utf-8")
                tail = [ln for ln in run.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
                entry = {**row, "line": line, "exit": run.returncode, "failed": tail[:1]}
                (out["killed"] if run.returncode != 0 else out["survived"]).append(entry)
                log(f"  {'killed ' if run.returncode else 'SURVIVE'} {row['module']}:{line}: "
                    f"{' / '.join(row['diff'])}{'  <- ' + tail[0] if tail else ''}")
        finally:
            server.kill()
            server.wait()
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    log(f"{lab}: of {len(todo)} untriaged survivors of the last full run, {len(out['killed'])} are killed now, "
        f"{len(out['survived'])} survive, {len(out['not_found'])} no longer exist (the line changed)")
    out.update(projection(prior, out))
    return out


def projection(prior: dict, out: dict) -> dict:
    """What the next full run should report if the full run's kills still hold and its mutants
    are the same (the target files unchanged since it): its kills, plus the survivors the
    recheck killed; equivalents as the triage reads them today. A projection, not a score:
    only a full run is the lab's score."""
    rows = prior["mutants_detail"]
    newly = {(r["module"], tuple(r["diff"])) for r in out["killed"]}
    killed = sum(1 for r in rows if r["killed_by"] or (r["module"], tuple(r["diff"])) in newly)
    equivalent = sum(1 for r in rows if not r["killed_by"] and (r["module"], tuple(r["diff"])) not in newly
                     and equivalence(r["module"], r["diff"]))
    counted = len(rows) - equivalent
    return {"projection": {"mutants": len(rows), "killed": killed, "equivalent": equivalent,
                           "survived": counted - killed, "score": round(killed / counted, 4) if counted else None,
                           "raw_score": round(killed / len(rows), 4) if rows else None,
                           "from_full_run_seconds": prior.get("seconds")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Mutation score of the graders per lab (mutmut and its runner).")
    ap.add_argument("labs", nargs="*", default=None, help=f"default: {' '.join(default_labs())}")
    ap.add_argument("--keep", action="store_true", help="keep the private copy mutmut ran in (with .mutmut-cache)")
    ap.add_argument("--from", dest="kept", type=Path, default=None,
                    help="rebuild one lab's report from a copy kept by --keep (after editing the triage), no run")
    ap.add_argument("--recheck", action="store_true",
                    help="run only the last report's untriaged survivors against the graders as they are now "
                         "(for trying new cases); writes benchmarks/results/mutation_LAB_recheck.json with a "
                         "projection, never the lab's report")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.recheck:
        if not args.labs:
            ap.error("--recheck needs a lab")
        for lab in args.labs:
            r = recheck(lab, log=lambda *a: print(*a, flush=True))
            (OUT / f"mutation_{lab}_recheck.json").write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
            pr = r["projection"]
            print(f"{lab} projected: {pr['killed']} killed, {pr['equivalent']} equivalent, {pr['survived']} survived "
                  f"of {pr['mutants']} ({100 * (pr['score'] or 0):.1f}% triaged, {100 * (pr['raw_score'] or 0):.1f}% raw)"
                  f" -> benchmarks/results/mutation_{lab}_recheck.json", flush=True)
        return 0
    rows = []
    if args.kept is not None and len(args.labs or []) != 1:
        ap.error("--from needs exactly one lab")
    for lab in args.labs or default_labs():
        if args.kept is not None:
            r = report(lab, args.kept, float((args.kept / ".mutation-seconds").read_text(encoding="utf-8")))
        else:
            r = run_lab(lab, keep=args.keep, log=lambda *a: print(*a, flush=True))
        (OUT / f"mutation_{lab}.json").write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
        rows.append(r)
        print(f"{lab}: {r['killed']} killed, {r['equivalent']} equivalent, {r['survived']} survived of "
              f"{r['mutants']} ({100 * (r['score'] or 0):.1f}% of the non-equivalent), {r['seconds']:.0f} s "
              f"({r['seconds_per_mutant']:.1f} s a mutant)", flush=True)
        for s in r["survivors"]:
            print(f"  survived {s['module']}:{s['line']}: {' / '.join(s['diff'])}")
    print("\n| lab | mutants | killed | equivalent | survived | score | raw score | seconds |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['lab']} | {r['mutants']} | {r['killed']} | {r['equivalent']} | {r['survived']} | "
              f"{100 * (r['score'] or 0):.1f}% | {100 * (r['raw_score'] or 0):.1f}% | {r['seconds']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
