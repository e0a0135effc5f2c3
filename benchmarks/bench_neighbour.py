"""What a hostile classmate costs an honest one: the same honest lab00 notebook graded
alone, next to two honest classmates, and next to two submissions that each send 63 MiB
(the adversarial corpus's huge_result with its size raised to 63 MiB, which the child
refuses to send, and huge_raw_write, which writes 63 MiB into every pipe past that check).

    .venv/bin/python benchmarks/bench_neighbour.py                 # 6 rounds
    .venv/bin/python benchmarks/bench_neighbour.py --rounds 9

Each round grades three batches, each in a fresh process (so its peak resident memory,
ru_maxrss, is that batch's alone), in an order that rotates from round to round:

    alone    [honest]                                            3 workers
    company  [honest, two copies of it]                          3 workers
    hostile  [honest, huge_result (63 MiB), huge_raw_write]      3 workers

and compares the honest notebook's own grading time (the record's `seconds`: its child's
boot, the probes, and the parent's judging, which every worker's submission shares) and
the batch's wall time. Every round checks that the honest record is the same in all three
batches (score, and every case's verdict and message) and that each hostile one scores 0.
Each factor (hostile / alone, hostile / company, company / alone) is the median over rounds
of the ratio within a round, with its smallest and largest value: hostile / alone is what a
classmate costs in all, hostile / company what the 63 MiB messages cost beyond sharing the
machine's cores with two other children. The 1-minute load average is recorded before every
batch. Writes benchmarks/results/neighbour.json and neighbour.png.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.core import get_tests  # noqa: E402
from autograder.isolation import MAX_MESSAGE, Sandbox  # noqa: E402
from autograder.tests.adversarial.neighbours import HONEST, HOSTILE, build, verdicts  # noqa: E402
from bench_grading import load, spread  # noqa: E402  (the load average and median/min/max, as there)

WORKERS = 3

# one batch, in its own process: prints BATCH {records, wall_s, maxrss_kib}
_BATCH = r'''
import json, resource, sys, time
from pathlib import Path
from autograder.batch import Entry, grade_batch
from autograder.isolation import Limits
subs, out, workers = json.loads(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
limits = Limits(timeout=120, test_timeout=30, case_timeout=15, cell_timeout=30, memory=2 << 30,
                max_deaths_per_test=6)
t0 = time.perf_counter()
grade_batch([Entry(s, Path(p)) for s, p in subs.items()], "lab00", out, workers=workers, limits=limits,
            progress=False)
wall = time.perf_counter() - t0
recs = {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}
print("BATCH " + json.dumps({"wall_s": wall, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                             "records": recs}))
'''


def batch(subs: dict[str, Path], out: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    before = load()
    r = subprocess.run([sys.executable, "-c", _BATCH, json.dumps({s: str(p) for s, p in subs.items()}), str(out),
                        str(WORKERS)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("BATCH ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the batch failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    got = json.loads(lines[-1][6:])
    got["load_before"] = before
    return got


SIDES = ("alone", "company", "hostile")
RATIOS = (("hostile", "alone"), ("hostile", "company"), ("company", "alone"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out-stem", default="neighbour")
    args = ap.parse_args(argv)
    full = sum(t.points for t in get_tests("lab00").values())
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-neighbour-") as tmp:
        nbs = build(Path(tmp) / "src")
        copies = {}
        for sid in ("b_honest", "c_honest"):
            (Path(tmp) / "src" / sid).mkdir(parents=True)
            copies[sid] = shutil.copy(nbs[HONEST], Path(tmp) / "src" / sid / "lab00.ipynb")
        sides = {"alone": {HONEST: nbs[HONEST]}, "company": {HONEST: nbs[HONEST], **copies}, "hostile": nbs}
        reference = None
        for i in range(args.rounds):
            order = list(SIDES[i % 3:] + SIDES[:i % 3])
            got = {side: batch(sides[side], Path(tmp) / f"out{i}-{side}") for side in order}
            v = {side: verdicts(got[side]["records"][HONEST]) for side in SIDES}
            reference = reference or v["alone"]
            if any(v[side] != reference for side in SIDES) or reference["score"] != full:
                raise SystemExit(f"round {i}: the honest grade differs: {json.dumps(v)[:3000]}")
            for sid in copies:
                if verdicts(got["company"]["records"][sid]) != reference:
                    raise SystemExit(f"round {i}: the honest copy {sid} got another grade")
            for name in HOSTILE:
                rec = got["hostile"]["records"][name]
                if rec["score"] != 0 or rec["status"] != "graded":
                    raise SystemExit(f"round {i}: {name} scored {rec['score']} ({rec['status']})")
            row = {"order": order}
            for side in SIDES:
                row[side] = {"honest_s": got[side]["records"][HONEST]["seconds"],
                             "batch_wall_s": round(got[side]["wall_s"], 3),
                             "parent_maxrss_mib": round(got[side]["maxrss_kib"] / 1024, 1),
                             "load_before": got[side]["load_before"]}
            for a, b in RATIOS:
                row[f"{a}/{b}"] = round(row[a]["honest_s"] / row[b]["honest_s"], 3)
            row["rss_growth_mib"] = round(row["hostile"]["parent_maxrss_mib"] - row["company"]["parent_maxrss_mib"], 1)
            rounds.append(row)
            print(f"round {i} ({', '.join(order)}): honest " +
                  ", ".join(f"{row[s]['honest_s']:.2f} s {s}" for s in SIDES) +
                  f"; hostile/alone x{row['hostile/alone']:.2f}, hostile/company x{row['hostile/company']:.2f}; "
                  "parent peak " + " / ".join(f"{row[s]['parent_maxrss_mib']:.0f}" for s in SIDES) +
                  " MiB; load " + ", ".join(str(row[s]["load_before"]) for s in order), flush=True)
    loads = [r[s]["load_before"] for r in rounds for s in r["order"]]
    result = {
        "lab": "lab00", "workers": WORKERS, "rounds": args.rounds, "message_limit_bytes": MAX_MESSAGE,
        "hostile": {"b_huge_result": "returns a 63 MiB string (the child refuses to send it)",
                    "c_huge_raw_write": "writes 63 MiB into every pipe, past the child's check"},
        "honest_grade_identical_every_round": True, "honest_score": reference["score"], "max_score": full,
        "honest_s": {s: spread(r[s]["honest_s"] for r in rounds) for s in SIDES},
        "factors": {f"{a}/{b}": spread(r[f"{a}/{b}"] for r in rounds) for a, b in RATIOS},
        "batch_wall_s": {s: spread(r[s]["batch_wall_s"] for r in rounds) for s in SIDES},
        "parent_maxrss_mib": {s: spread(r[s]["parent_maxrss_mib"] for r in rounds) for s in SIDES},
        "parent_rss_growth_hostile_over_company_mib": spread(r["rss_growth_mib"] for r in rounds),
        "load_average_1min": {"min": min(loads), "max": max(loads), "each_batch": loads},
        "cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "sandbox": Sandbox.detect().describe(),
        "paired_rounds": rounds,
    }
    dest = ROOT / "benchmarks" / "results"
    (dest / f"{args.out_stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, dest / f"{args.out_stem}.png")
    for name, f in result["factors"].items():
        print(f"honest notebook, {name}: x{f['median']:.2f} [{f['min']:.2f}-{f['max']:.2f}]")
    print(f"{args.rounds} rounds, load {min(loads)}-{max(loads)}; grading parent's peak, hostile batch over "
          f"company: {result['parent_rss_growth_hostile_over_company_mib']['median']:+} MiB (median)")
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rounds = result["paired_rounds"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    xs = range(len(rounds))
    labels = {"alone": "graded alone", "company": "next to two honest copies",
              "hostile": "next to two 63 MiB senders"}
    for side, mark in zip(SIDES, "o^s"):
        a.plot(xs, [r[side]["honest_s"] for r in rounds], mark + "-", label=labels[side])
    a.set_xlabel("round")
    a.set_ylabel("honest notebook's grading time (s)")
    a.set_ylim(bottom=0)
    a.legend(fontsize=8)
    a.set_title("the same grade in every batch of every round", fontsize=10)
    b.bar(list(SIDES), [result["parent_maxrss_mib"][s]["median"] for s in SIDES])
    b.set_ylabel("grading parent's peak RSS (MiB, median)")
    f, ld = result["factors"], result["load_average_1min"]
    fig.suptitle(f"lab00, {result['workers']} workers, {result['cpu_count']} cores, load {ld['min']}-{ld['max']}: "
                 f"hostile/alone x{f['hostile/alone']['median']:.2f}, "
                 f"hostile/company x{f['hostile/company']['median']:.2f} "
                 f"[{f['hostile/company']['min']:.2f}-{f['hostile/company']['max']:.2f}]", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
