"""Imports the course modules that hold labs' answers (course.sampling, course.generation,
course.acceptance, course.paged_kv, ...): while lab00 is graded every one of them is
for a later lab, so none may be imported, read or even seen."""
import importlib
import os

import course

EXPECT = {"max_score": 0, "output_not": ["LEAK"], "output_has": ["TRIED"]}

folder = os.path.dirname(course.__file__)
for name in ("sampling", "generation", "acceptance", "paged_kv", "tracing", "engine"):
    try:
        importlib.import_module(f"course.{name}")
        print("LEAK import", name)
    except Exception as e:  # noqa: BLE001
        print("TRIED import", name, type(e).__name__)
    if os.path.exists(os.path.join(folder, f"{name}.py")):
        print("LEAK visible", name)
print("TRIED listing", sorted(n for n in os.listdir(folder) if n.endswith(".py")))


def greedy_token(logits):
    return 0
