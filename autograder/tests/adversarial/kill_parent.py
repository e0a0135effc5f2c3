"""Tries to stop the batch: kills the parent process (and its group) and every process
id near it, at the top level and in the function."""
import os
import signal

EXPECT = {"max_score": 0, "output_has": ["TRIED kill"]}


def attack():
    ppid = os.getppid()
    for pid in (ppid, -ppid, 0, -1):
        try:
            os.kill(pid, signal.SIGKILL)
            print("KILLED", pid)
        except Exception as e:  # noqa: BLE001
            print("TRIED kill", pid, type(e).__name__)
    try:
        os.killpg(os.getpgid(ppid), signal.SIGKILL)
    except Exception as e:  # noqa: BLE001
        print("TRIED killpg", type(e).__name__)


attack()


def greedy_token(logits):
    attack()
    return 0
