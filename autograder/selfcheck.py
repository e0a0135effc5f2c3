"""What `python -m autograder check` needs around the isolated grader: find the notebook the
learner means, wherever they run the command from, show that the check is working, and
start the slow parts early and side by side.

    resolve_notebook("lab01/lab01.ipynb")   # from work/ (JupyterLab's terminal)
    resolve_notebook("work/lab01/lab01.ipynb")  # from the course folder
    resolve_notebook("lab01")               # either: work/lab01/lab01.ipynb
    estimate(lab)                           # the header's "about N s": the last check of the lab here
    remember_seconds(lab, 6.2)
    warm = warm_up(lab, runtime)            # before runtime.zygote(0); warm.join() before grading

Where a check's time goes (a solved lab05 on 2 cores): the sandboxed zygote imports torch,
the course and the lab's setup cells (about 3 s), and where the visible cases run the
shipped tiny model (lab04, lab05), the probe and the judge each import transformers and
load it (about 2 s on each side, one after the other: the parent judges a case before it
sends the next).
`warm_up` loads the model once in the zygote, before any child is forked, so every child
inherits it (it is the shipped model, the same for every student; no student code has run
yet), and once in the parent on a thread while the zygote starts.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "work"
LAB_NAME = re.compile(r"lab\d\d")


class NotebookNotFound(ValueError):
    """No notebook where the learner pointed; the message names every path looked at."""


def candidates(path: str, cwd: Path | None = None) -> list[Path]:
    """The files `path` may mean, most likely first: as given (from the current folder), then
    under the work folder and the course folder; a bare lab name means its notebook in work/."""
    cwd = Path(cwd or Path.cwd())
    p = Path(path).expanduser()
    found = [p if p.is_absolute() else cwd / p]
    name = str(path).strip().rstrip("/")
    if LAB_NAME.fullmatch(name):
        found.append(WORK / name / f"{name}.ipynb")
    if not p.is_absolute():
        found += [WORK / p, ROOT / p]
    out = []
    for c in found:
        if c.suffix != ".ipynb":   # a lab folder: the notebook named after it
            c = c / f"{c.name}.ipynb"
        c = Path(str(c))
        if c not in out:
            out.append(c)
    return out


def resolve_notebook(path: str, cwd: Path | None = None) -> Path:
    """The absolute path of the notebook `path` means; NotebookNotFound names every path
    looked at when there is none."""
    if not isinstance(path, str) or not path.strip():
        raise NotebookNotFound(f"`notebook` must be a path to a .ipynb file, got {path!r}.")
    tried = candidates(path, cwd)
    for c in tried:
        if c.is_file():
            return c.resolve()
    looked = "\n".join(f"  {c.resolve() if c.parent.exists() else c}" for c in tried)
    raise NotebookNotFound(f"no notebook at {tried[0]}; looked for:\n{looked}\n"
                           f"Your own copies of the labs are in {WORK} (`make lab` makes them).")


@contextmanager
def heartbeat(what: str, *, every: float = 5.0, out=None):
    """Print `what`, then a line every `every` seconds until the block ends, so a check that
    takes long (a busy machine, an endless loop waiting for its timeout) never looks stuck."""
    out = out or sys.stderr
    print(what, file=out, flush=True)
    done = threading.Event()
    start = time.monotonic()

    def tick():
        while not done.wait(every):
            print(f"  ... {time.monotonic() - start:.0f} s, still checking", file=out, flush=True)

    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        print(f"  done in {time.monotonic() - start:.0f} s", file=out, flush=True)


# ---------------------------------------------------------------- how long it takes here

def seconds_file() -> Path:
    """Where the last check's duration per lab is kept: the user's cache folder
    ($XDG_CACHE_HOME, else ~/.cache), never the course folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "logit-to-first-token" / "check-seconds.json"


def _read_seconds() -> dict:
    try:
        data = json.loads(seconds_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def last_seconds(lab: str) -> float | None:
    """How long the last check of `lab` took on this machine (header to report), or None."""
    v = _read_seconds().get(lab)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def remember_seconds(lab: str, seconds: float) -> None:
    """Keep how long this check of `lab` took, for the next header. Best effort: a cache
    that cannot be written only costs the estimate."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"`seconds` must be a positive number, got {seconds!r}.")
    data = _read_seconds()
    data[lab] = round(float(seconds), 1)
    path = seconds_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".check-seconds.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def estimate(lab: str, lang: str | None = None) -> str:
    """The header's estimate: the last check of `lab` on this machine, rounded up to whole
    seconds; before any, a wide range (benchmarks/bench_selfcheck.py measures the check)."""
    from . import messages
    last = last_seconds(lab)
    if last is None:
        return messages.text("check.estimate_first", lang)
    return messages.text("check.estimate_last", lang, seconds=max(1, math.ceil(last)), lab=lab)


# ---------------------------------------------------------------- warming up

# Run by the zygote as warm-up cells (trusted code, before any child exists). A cell that
# fails there is skipped, and the probe then loads the model itself. The decoder cell reads
# the weights straight from their files (no transformers import: seconds less).
WARM_MODEL_CELL = "from autograder.checks import shipped_model\nshipped_model()\n"
WARM_DECODER_CELL = "from autograder.checks import shipped_decoder\nshipped_decoder()\n"
LOADERS = {"shipped_model": WARM_MODEL_CELL, "shipped_decoder": WARM_DECODER_CELL}


def model_loaders(lab: str, root: Path | None = None) -> list[str]:
    """Which of autograder.checks' loaders of the tiny model (shipped_model: transformers'
    model; shipped_decoder: the course's decoder from the files) the lab's graders
    (autograder/graders/labNN.py, or the files of a labNN/ package) call."""
    graders = Path(root or ROOT) / "autograder" / "graders"
    files = [graders / f"{lab}.py", *sorted((graders / lab).glob("*.py"))]
    text = "".join(p.read_text(encoding="utf-8") for p in files if p.is_file())
    return [name for name in LOADERS if name in text]


def loads_shipped_model(lab: str, root: Path | None = None) -> bool:
    """True when the lab's graders use the shipped tiny model (either loader)."""
    return bool(model_loaders(lab, root))


# The labs whose VISIBLE cases run the shipped model, as the course's decoder read from its
# files (tests/test_selfcheck_startup.py runs every lab's visible cases on its solution to
# keep this true). Warming it for a check of another lab only costs time: lab07's graders
# use the model in hidden cases alone, and warming it there took a check from 3.6 to 8.5
# CPU-seconds.
VISIBLE_CASES_USE_MODEL = frozenset({"lab04", "lab05"})


def warm_up(lab: str, runtime, *, visible_only: bool = True) -> threading.Thread | None:
    """Before `runtime.zygote(0)` starts the sandbox: when the cases to run use the shipped
    model, have the zygote load it with the lab's setup cells, and on a thread get the judges'
    side ready: for the visible cases, the expected values kept with the graders
    (autograder/memo.py) when they are current; otherwise the parent's own copy of the model.
    Returns that thread (join it before grading), or None."""
    if visible_only:
        loaders = ["shipped_decoder"] if lab in VISIBLE_CASES_USE_MODEL else []
    else:
        loaders = model_loaders(lab)
    if not loaders:
        return None
    runtime.warm_cells = [*runtime.warm_cells,
                          *(LOADERS[n] for n in loaders if LOADERS[n] not in runtime.warm_cells)]

    def load():   # importing torch happens here too, so the zygote is not kept waiting for it
        try:
            from . import checks, memo
            if visible_only and memo.is_current(lab):
                return                    # the visible judges read the kept values: no model here
            for name in loaders:
                getattr(checks, name)()
        except Exception:   # the judge loads it again and reports what went wrong
            pass

    thread = threading.Thread(target=load, name="warm-shipped-model", daemon=True)
    thread.start()
    return thread
