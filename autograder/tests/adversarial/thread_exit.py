"""Starts a thread that ends the process shortly after the cells ran (a delayed os._exit)."""
import os
import threading
import time

EXPECT = {"max_score": 0}


def _later():
    time.sleep(0.2)
    os._exit(0)


threading.Thread(target=_later, daemon=True).start()


def greedy_token(logits):
    time.sleep(1.0)
    return int(logits.argmax())
