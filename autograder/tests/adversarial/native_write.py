"""Writes files through a native writer Python's audit hooks cannot see
(torch.UntypedStorage.from_file(path, shared=True, size)): a .pth into site-packages (which
would run in later children before their audit hook), a module into the course library,
files next to the interpreter. Every one of those is read-only in the sandbox."""
import site
import sys
from pathlib import Path

import course
import torch

EXPECT = {"max_score": 0, "output_not": ["LEAK"], "output_has": ["TRIED"], "needs_os": True}

readers = []
for owner in (torch.UntypedStorage, getattr(torch._C, "StorageBase", None), torch.TypedStorage):
    f = getattr(owner, "from_file", None) if owner is not None else None
    if f is not None:
        readers.append(f)
for base in torch.UntypedStorage.__mro__:
    f = vars(base).get("from_file")
    if f is not None:
        readers.append(f.__get__(None, torch.UntypedStorage) if hasattr(f, "__get__") else f)
targets = [Path(p) / "l2ft_pwned.pth" for p in site.getsitepackages()]
targets += [Path(course.__file__).resolve().parent / "pwned.py", Path(sys.executable).resolve().parent / "pwned"]
for t in targets:
    for writer in readers:
        try:
            writer(str(t), True, 64)
            print("LEAK wrote", t, flush=True)
            break
        except Exception as e:  # noqa: BLE001
            print("TRIED", t, type(e).__name__)
    else:
        print("TRIED", t, "(no native writer left)")


def greedy_token(logits):
    return 0
