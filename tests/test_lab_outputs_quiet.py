"""A lab's outputs hold what the lab prints, not third-party progress bars or warnings, and
a notebook loads the tiny model's weights once.

Statically, over every solution notebook (running them all is e2e's job): the weights are
loaded at most once (load_tiny_model, or a from_pretrained of a folder), and transformers'
progress bar is switched off before that load. Then one real run: lab04's setup and
model-loading cells print nothing to stderr.
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted(p.name for p in (ROOT / "solutions").glob("lab[0-9][0-9]") if (p / f"{p.name}.ipynb").is_file())
# labs whose notebooks still reload the model or leave the bar on; take a lab out when its
# notebook is fixed (none today)
RELOADS: dict[str, str] = {}
BAR_ON: dict[str, str] = {}


def _code_cells(lab: str) -> list[tuple[str, str]]:
    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text(encoding="utf-8"))
    return [(c.get("id", "?"), "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"]


def _is_path(node) -> bool:
    """A folder argument: a string, a Path(...), or a constant such as TINY_MODEL_DIR."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Path":
        return True
    return isinstance(node, ast.Name) and node.id.isupper() and node.id.endswith(("_DIR", "_PATH"))


def _events(source: str) -> list[tuple[int, str]]:
    """(line, "load" | "quiet") in source order: weight loads and progress-bar switches."""
    try:
        tree = ast.parse(source)
    except SyntaxError:      # IPython magics: nothing to see in a cell that is not Python
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        owner = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
        if name == "load_tiny_model":
            out.append((node.lineno, "load"))
        elif name == "from_pretrained" and "Tokenizer" not in owner and node.args and _is_path(node.args[0]):
            out.append((node.lineno, "load"))
        elif name == "disable_progress_bar":
            out.append((node.lineno, "quiet"))
    return sorted(out)


def _notebook_events(lab: str) -> list[tuple[str, str]]:
    return [(cid, kind) for cid, src in _code_cells(lab) for _, kind in _events(src)]


def _lab_params(pending: dict):
    return [pytest.param(lab, marks=pytest.mark.xfail(reason=pending[lab], strict=False)) if lab in pending
            else lab for lab in LABS]


def test_the_static_scan_sees_loads_and_switches():
    src = ("hf_logging.disable_progress_bar()\nm, t = load_tiny_model(device)\n"
           "d = CourseDecoder.from_pretrained(m)\nd2 = CourseDecoder.from_pretrained(TINY_MODEL_DIR)\n"
           "tok = AutoTokenizer.from_pretrained(TINY_MODEL_DIR)\n")
    assert [k for _, k in _events(src)] == ["quiet", "load", "load"]


@pytest.mark.parametrize("lab", _lab_params(RELOADS))
def test_the_tiny_model_is_loaded_at_most_once(lab):
    loads = [cid for cid, kind in _notebook_events(lab) if kind == "load"]
    assert len(loads) <= 1, f"{lab} loads the tiny model's weights {len(loads)} times (cells {', '.join(loads)})"


@pytest.mark.parametrize("lab", _lab_params(BAR_ON))
def test_the_progress_bar_is_off_before_the_model_loads(lab):
    events = _notebook_events(lab)
    loads = [i for i, (_, kind) in enumerate(events) if kind == "load"]
    if not loads:
        return
    assert any(kind == "quiet" for _, kind in events[:loads[0]]), (
        f"{lab}: cell {events[loads[0]][0]} loads the tiny model with transformers' progress bar on; call "
        "transformers.utils.logging.disable_progress_bar() first")


@pytest.mark.slow
def test_lab04_loads_the_model_without_printing_to_stderr():
    cells = dict(_code_cells("lab04"))
    program = cells["imports"] + "\n" + cells["load-model"]
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "layers, width" in p.stdout
    assert p.stderr == "", f"lab04's model cells wrote to stderr: {p.stderr[-1000:]!r}"
