"""How many students one machine serves: N users on a scratch hub, each running lab01's
self-check at the same time; time to ready and memory per user.

    sudo .venv/bin/python hub/bench_users.py --users 12 --out hub/bench_users.json

As root (it makes Unix users): makes N students ltft-bench-NN and an instructor on a
scratch course (hub/roster.py apply, removed afterwards), starts the hub of
hub/jupyterhub_config.py, then for every student at once: log in with PAM, spawn the
server, open JupyterLab (time to ready: from the spawn request to the page), start a
kernel and run lab01's imports, every solution cell and the self-check cell (time of the
self-check run). With every kernel still alive it reads each user's processes from /proc:
RSS (what `top` shows) and PSS (each shared page split among the processes sharing it:
the per-user share of the machine's memory), and the machine's MemAvailable before the
hub started and at that moment. The users-per-machine figures divide what was available
before (and the machine's whole memory) by the measured memory per user, keeping 2 GiB
for the system; CPU is the other limit, and self_check_s shows it: N users running the
self-check at once share the cores.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import json
import os
import platform
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import requests

HUB = Path(__file__).resolve().parent
REPO = HUB.parent
sys.path.insert(0, str(HUB))
import roster as class_roster  # noqa: E402

PREFIX = "ltft-bench-"
TEACHER = f"{PREFIX}teacher"
GROUP = "ltft-bench-instructors"
GiB = 1024 ** 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def user_memory(uid: int) -> dict:
    """RSS and PSS (bytes) summed over the processes of `uid`."""
    rss = pss = n = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if d.stat().st_uid != uid:
                continue
            for line in (d / "smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
            n += 1
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return {"processes": n, "rss": rss, "pss": pss}


def remove_users(names) -> None:
    for name in names:
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue
        for pid in subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["userdel", "--remove", name], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)


def self_check_code() -> list[str]:
    """lab01's imports, every solution cell, then the self-check cell: what a student who
    finished the lab runs before submitting."""
    nb = nbformat.read(str(REPO / "solutions" / "lab01" / "lab01.ipynb"), as_version=4)
    out = []
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") in ("imports", "self_check")):
            out.append(c.source)
    return out


def run_in_kernel(session: requests.Session, server: str, xsrf: str, cells: list[str], timeout: float) -> dict:
    """Start a kernel on the user's server, run `cells` over its websocket; seconds and the
    self-check's last lines."""
    import websocket
    r = session.post(f"{server}/api/kernels", json={"name": "python3"}, headers={"X-XSRFToken": xsrf}, timeout=60)
    r.raise_for_status()
    kid = r.json()["id"]
    cookies = "; ".join(f"{c.name}={c.value}" for c in session.cookies)
    ws = websocket.create_connection(f"{server.replace('http', 'ws', 1)}/api/kernels/{kid}/channels",
                                     cookie=cookies, header=[f"X-XSRFToken: {xsrf}"], timeout=timeout)
    start = time.monotonic()
    text, errors = [], []
    try:
        for code in cells:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({"channel": "shell", "header": {"msg_id": msg_id, "username": "bench", "session": kid,
                                                               "msg_type": "execute_request", "version": "5.3"},
                                "parent_header": {}, "metadata": {}, "buffers": [],
                                "content": {"code": code, "silent": False, "store_history": False,
                                            "user_expressions": {}, "allow_stdin": False}}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "stream":
                    text.append(msg["content"]["text"])
                elif kind == "error":
                    errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    break
    finally:
        ws.close()
    return {"seconds": time.monotonic() - start, "errors": errors, "tail": "".join(text)[-400:], "kernel": kid}


def one_student(url: str, name: str, password: str, cells: list[str], timeout: float) -> dict:
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=60)
    r = s.post(f"{url}/hub/login", allow_redirects=False, timeout=120,
               data={"username": name, "password": password, "_xsrf": s.cookies.get("_xsrf", path="/hub/")})
    if r.status_code != 302:
        return {"user": name, "error": f"login: {r.status_code}"}
    server = f"{url}/user/{name}"
    t0 = time.monotonic()
    s.get(f"{url}/hub/spawn/{name}", timeout=timeout)
    while time.monotonic() - t0 < timeout:
        r = s.get(f"{server}/lab", timeout=timeout)
        if r.status_code == 200 and r.url.startswith(f"{server}/lab") and "jupyter-config-data" in r.text:
            break
        time.sleep(1)
    else:
        return {"user": name, "error": "server not ready"}
    ready = time.monotonic() - t0
    xsrf = next(c.value for c in s.cookies if c.name == "_xsrf" and c.path.startswith(f"/user/{name}"))
    run = run_in_kernel(s, server, xsrf, cells, timeout)
    passed = "visible checks passed" in run["tail"] and not run["errors"]
    return {"user": name, "ready_s": round(ready, 2), "self_check_s": round(run["seconds"], 2),
            "self_check_passed": passed, "errors": run["errors"], "tail": run["tail"][-200:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=12)
    ap.add_argument("--out", default=str(HUB / "bench_users.json"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds per student for each step")
    ns = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("error: run as root (it makes Unix users and starts servers as them)", file=sys.stderr)
        return 2
    students = [f"{PREFIX}{i:02d}" for i in range(1, ns.users + 1)]
    names = [TEACHER, *students]
    remove_users(names)
    base = Path(tempfile.mkdtemp(prefix="ltft-bench-"))
    base.chmod(0o755)
    (base / "homes").mkdir(mode=0o755)
    passwords = {n: secrets.token_urlsafe(12) for n in names}
    roster = base / "roster.csv"
    with roster.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "role"])
        w.writerow([TEACHER, "instructor"])
        for n in students:
            w.writerow([n, "student"])
    port = free_port()
    env = {**os.environ, "LTFT_HUB_ROSTER": str(roster), "LTFT_HUB_STATE": str(base / "state"),
           "LTFT_HUB_PORT": str(port), "LTFT_COURSE_DIR": str(base / "course"),
           "LTFT_EXCHANGE": str(base / "exchange"), "LTFT_INSTRUCTORS_GROUP": GROUP}
    url = f"http://127.0.0.1:{port}"
    hub = None
    acl_added = []
    try:
        subprocess.run([sys.executable, str(HUB / "roster.py"), "apply", str(roster), "--home-base",
                        str(base / "homes")], env=env, check=True, capture_output=True, timeout=300)
        subprocess.run(["chpasswd"], input="".join(f"{n}:{p}\n" for n, p in passwords.items()), text=True, check=True)
        for folder in class_roster.closed_folders(sys.executable):     # a Python under /root
            for n in names:    # only these entries are removed afterwards (an ACL mask entry may stay)
                subprocess.run(["setfacl", "-m", f"u:{n}:x", str(folder)], check=True)
            acl_added.append(folder)
        config = base / "jupyterhub_bench_config.py"
        config.write_text("c = get_config()\n"
                          f"load_subconfig({str(HUB / 'jupyterhub_config.py')!r})\n"
                          f"c.JupyterHub.hub_port = {free_port()}\n"
                          f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{free_port()}'\n"
                          "c.JupyterHub.concurrent_spawn_limit = 0\n"
                          "c.Spawner.http_timeout = 600\nc.Spawner.start_timeout = 600\n")
        available_before = meminfo("MemAvailable")
        load_before = os.getloadavg()[0]
        log = (base / "hub.log").open("w")
        hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=base, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
        for _ in range(240):
            try:
                if requests.get(f"{url}/hub/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.5)
        cells = self_check_code()
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(len(students)) as pool:
            results = list(pool.map(lambda n: one_student(url, n, passwords[n], cells, ns.timeout), students))
        wall = time.monotonic() - t0
        for r in results:                     # every kernel is still running
            r.update({k: v for k, v in user_memory(pwd.getpwnam(r["user"]).pw_uid).items()})
        available_during = meminfo("MemAvailable")
        ok = [r for r in results if r.get("self_check_passed")]
        per_user_pss = sum(r["pss"] for r in ok) / max(1, len(ok))
        per_user_rss = sum(r["rss"] for r in ok) / max(1, len(ok))
        drop = (available_before - available_during) / max(1, len(results))
        ready = sorted(r["ready_s"] for r in ok)
        checks = sorted(r["self_check_s"] for r in ok)
        summary = {
            "machine": {"cpus": os.cpu_count(), "mem_total_gib": round(meminfo("MemTotal") / GiB, 1),
                        "python": platform.python_version(), "kernel": platform.release()},
            "load_average_1min": {"before": round(load_before, 1), "after": round(os.getloadavg()[0], 1)},
            "users": len(students), "self_check_passed": len(ok), "wall_s": round(wall, 1),
            "ready_s": {"median": ready[len(ready) // 2] if ready else None, "max": ready[-1] if ready else None},
            "self_check_s": {"median": checks[len(checks) // 2] if checks else None,
                             "max": checks[-1] if checks else None},
            "per_user_mib": {"pss": round(per_user_pss / 2**20), "rss": round(per_user_rss / 2**20),
                             "mem_available_drop": round(drop / 2**20)},
            "mem_available_gib": {"before": round(available_before / GiB, 2),
                                  "with_all_users": round(available_during / GiB, 2)},
            # what was free when the run began (other work included), and the whole machine
            "users_per_machine_by_memory": {
                "available": int((available_before - 2 * GiB) / max(per_user_pss, drop, 1)),
                "total": int((meminfo("MemTotal") - 2 * GiB) / max(per_user_pss, drop, 1))},
            "per_user": [{k: r.get(k) for k in ("user", "ready_s", "self_check_s", "self_check_passed", "processes",
                                                "rss", "pss", "errors", "error")} for r in results],
            "note": "times include whatever else the machine ran (load_average_1min); memory does not depend on it",
        }
        Path(ns.out).write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps({k: v for k, v in summary.items() if k != "per_user"}, indent=1))
        return 0 if len(ok) == len(students) else 1
    finally:
        if hub is not None:
            hub.send_signal(signal.SIGTERM)
            try:
                hub.wait(timeout=120)
            except subprocess.TimeoutExpired:
                hub.kill()
        for folder in acl_added:
            for n in names:
                subprocess.run(["setfacl", "-x", f"u:{n}", str(folder)], capture_output=True)
        remove_users(names)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
