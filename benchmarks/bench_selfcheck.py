"""How long a learner waits for a self-check: in the notebook and from the terminal.

    .venv/bin/python benchmarks/bench_selfcheck.py                       # about 10 minutes on 2 busy cores
    .venv/bin/python benchmarks/bench_selfcheck.py --runs 3 --no-kernel --targets lab05
    .venv/bin/python benchmarks/bench_selfcheck.py --compare /path/to/an/older/checkout

Two measurements, each repeated `--runs` times (default 5), reported as median, min, max
and interquartile range, with the load average before every run (the machine this course
is developed on has 2 cores shared with other jobs, so single timings mean little):

1. **terminal**: `python -m autograder check NOTEBOOK --lang en` in a fresh process, from
   the course folder: the whole wall time, and the time until its first line reaches the
   terminal (stdout or stderr), and the CPU seconds of the whole process tree (the sandbox
   included), which other jobs on the machine disturb far less than wall time. Targets: the lab01 release (an unsolved stub) and the
   solutions of lab04, lab05 and lab07 (the labs whose graders run the tiny model, and the
   one with the most setup cells). With `--compare ROOT` every run of this checkout is
   paired with a run of the other one, alternately, and the report adds the median of the
   paired ratios (other / this), which a burst of load skews far less than two medians do.
2. **kernel**: the self-check cell of a lab (`autograder.kernel.self_check(lab, globals())`)
   in a real Jupyter kernel that has run every other code cell of the notebook: its first
   run (the graders are imported then) and `--runs` more in the warm kernel, timed from
   the execute request to the kernel going idle, and to the first line of output.

Writes benchmarks/results/selfcheck.json (and prints a table). Nothing here is asserted.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import selectors
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "selfcheck.json"
PYTHON = ROOT / ".venv" / "bin" / "python"
TARGETS = {                          # name -> notebook, relative to a checkout
    "lab01-stub": "labs/lab01/lab01.ipynb",
    "lab04": "solutions/lab04/lab04.ipynb",
    "lab05": "solutions/lab05/lab05.ipynb",
    "lab07": "solutions/lab07/lab07.ipynb",
}
KERNEL_TARGETS = {"lab01-stub": ("labs/lab01/lab01.ipynb", "lab01"),
                  "lab05": ("solutions/lab05/lab05.ipynb", "lab05"),
                  "lab07": ("solutions/lab07/lab07.ipynb", "lab07")}


def load() -> float:
    return os.getloadavg()[0]


def spread(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {}
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {"median": round(statistics.median(xs), 3), "min": round(xs[0], 3), "max": round(xs[-1], 3),
            "iqr": round(q[2] - q[0], 3), "n": len(xs)}


# ---------------------------------------------------------------- terminal

def time_check(root: Path, notebook: str, python: Path) -> dict:
    """One `python -m autograder check`: wall time, first line, exit status, load before."""
    before = load()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("COURSE_LANG", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(python), "-m", "autograder", "check", notebook, "--lang", "en"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = None
    tail = b""
    sel = selectors.DefaultSelector()
    for f in (proc.stdout, proc.stderr):
        sel.register(f, selectors.EVENT_READ)
    open_streams = 2
    while open_streams:
        for key, _ in sel.select():
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if first is None and b"\n" in data:
                first = time.perf_counter() - t0
            tail = (tail + data)[-4000:]
    _, status, usage = os.wait4(proc.pid, 0)      # the rusage of the whole tree: the sandbox is reaped inside
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    summary = [ln for ln in tail.decode("utf-8", "replace").splitlines() if "visible checks passed" in ln][-1:]
    return {"wall_s": round(wall, 3), "first_line_s": round(first if first is not None else wall, 3),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "exit": rc, "load_before": round(before, 2), "summary": summary[0] if summary else tail[-300:].decode()}


def bench_terminal(roots: dict[str, Path], targets: list[str], runs: int, python: Path) -> dict:
    out = {}
    for name in targets:
        rows: dict[str, list[dict]] = {label: [] for label in roots}
        for i in range(runs):
            order = list(roots.items()) if i % 2 == 0 else list(reversed(roots.items()))
            for label, root in order:
                r = time_check(root, TARGETS[name], python)
                rows[label].append(r)
                print(f"  {name:10s} {label:8s} run {i + 1}: {r['wall_s']:6.2f} s, first line {r['first_line_s']:5.2f} s,"
                      f" CPU {r['cpu_s']:5.1f} s (load {r['load_before']:.1f}, exit {r['exit']})", flush=True)
        entry = {label: {"wall_s": spread([r["wall_s"] for r in rs]), "cpu_s": spread([r["cpu_s"] for r in rs]),
                         "first_line_s": spread([r["first_line_s"] for r in rs]), "runs": rs}
                 for label, rs in rows.items()}
        if len(roots) == 2:
            this, other = list(roots)
            ratios = [o["wall_s"] / t["wall_s"] for t, o in zip(rows[this], rows[other])]
            entry["paired_ratio_other_over_this"] = spread(ratios)
        out[name] = entry
    return out


# ---------------------------------------------------------------- kernel

def bench_kernel(root: Path, targets: list[str], runs: int) -> dict:
    from jupyter_client.manager import start_new_kernel
    out = {}
    for name in targets:
        path, lab = KERNEL_TARGETS[name]
        nb = json.loads((root / path).read_text(encoding="utf-8"))
        km, kc = start_new_kernel(kernel_name="python3", cwd=str(root))
        try:
            def run(src: str) -> tuple[float, float, str]:
                t0 = time.perf_counter()
                first, text = None, []
                msg_id = kc.execute(src)
                while True:
                    m = kc.get_iopub_msg(timeout=900)
                    if m["parent_header"].get("msg_id") != msg_id:
                        continue
                    if m["msg_type"] == "stream":
                        first = first if first is not None else time.perf_counter() - t0
                        text.append(m["content"]["text"])
                    elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                        return time.perf_counter() - t0, first, "".join(text)

            check_cell = None
            t_cells = time.perf_counter()
            for cell in nb["cells"]:
                if cell["cell_type"] != "code":
                    continue
                src = "".join(cell["source"])
                if "self_check(" in src:
                    check_cell = src
                    continue
                run(src)
            t_cells = time.perf_counter() - t_cells
            rows = []
            for i in range(runs + 1):
                before = load()
                wall, first, text = run(check_cell)
                last = [ln for ln in text.splitlines() if ln.strip()][-1:] or [""]
                rows.append({"wall_s": round(wall, 3), "first_line_s": round(first or wall, 3),
                             "load_before": round(before, 2), "summary": last[0][:200]})
                print(f"  {name:10s} kernel {'first' if i == 0 else f'run {i}'}: {wall:6.2f} s, "
                      f"first line {first or wall:5.2f} s (load {before:.1f})", flush=True)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        out[name] = {"cells_before_s": round(t_cells, 1), "first_run": rows[0],
                     "warm_wall_s": spread([r["wall_s"] for r in rows[1:]]),
                     "warm_first_line_s": spread([r["first_line_s"] for r in rows[1:]]), "runs": rows[1:]}
    return out


def commit(root: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return head + ("+changes" if dirty else "") if head else "not a git checkout"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--targets", nargs="+", choices=sorted(TARGETS), default=sorted(TARGETS))
    p.add_argument("--kernel-targets", nargs="+", choices=sorted(KERNEL_TARGETS), default=sorted(KERNEL_TARGETS))
    p.add_argument("--compare", type=Path, help="another checkout of the course, run alternately with this one")
    p.add_argument("--no-terminal", action="store_true")
    p.add_argument("--no-kernel", action="store_true")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error(f"`--runs` must be at least 1, got {args.runs}.")
    python = PYTHON if PYTHON.exists() else Path(sys.executable)
    roots = {"this": ROOT}
    if args.compare:
        roots["other"] = args.compare.resolve()
    result = {"benchmark": "selfcheck", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                          "load_at_start": [round(x, 2) for x in os.getloadavg()]},
              "checkouts": {label: {"path": str(r), "commit": commit(r)} for label, r in roots.items()},
              "runs": args.runs}
    if not args.no_terminal:
        print("python -m autograder check (fresh process):", flush=True)
        result["terminal"] = bench_terminal(roots, args.targets, args.runs, python)
    if not args.no_kernel:
        print("self_check cell in a warm kernel:", flush=True)
        result["kernel"] = bench_kernel(ROOT, args.kernel_targets, args.runs)
    result["machine"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]

    print("\nmedian [min-max] seconds" + (" | other checkout | paired ratio other/this" if args.compare else ""))
    for name, e in result.get("terminal", {}).items():
        w, f = e["this"]["wall_s"], e["this"]["first_line_s"]
        line = (f"check {name:10s} {w['median']:6.2f} [{w['min']:.2f}-{w['max']:.2f}]  "
                f"first line {f['median']:5.2f} [{f['min']:.2f}-{f['max']:.2f}]  CPU {e['this']['cpu_s']['median']:5.1f}")
        if "other" in e:
            o = e["other"]["wall_s"]
            line += (f" | {o['median']:6.2f} [{o['min']:.2f}-{o['max']:.2f}], first line "
                     f"{e['other']['first_line_s']['median']:5.2f}, CPU {e['other']['cpu_s']['median']:5.1f}"
                     f" | x{e['paired_ratio_other_over_this']['median']:.2f}")
        print(line)
    for name, e in result.get("kernel", {}).items():
        w = e["warm_wall_s"]
        print(f"kernel {name:9s} {w['median']:6.2f} [{w['min']:.2f}-{w['max']:.2f}]  first run "
              f"{e['first_run']['wall_s']:.2f}, first line {e['warm_first_line_s']['median']:.2f}")
    print(f"load average at start {result['machine']['load_at_start']}, at end {result['machine']['load_at_end']} "
          f"on {os.cpu_count()} cores")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
