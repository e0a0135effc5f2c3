"""Every solution notebook runs top to bottom under nbclient on the CPU."""
import shutil
import time

import nbformat
import pytest
from nbclient import NotebookClient

from notebooks import ROOT, notebooks

SOLUTIONS = notebooks("solutions")


@pytest.mark.slow
@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.parent.name for p in SOLUTIONS])
def test_solution_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    work = tmp_path / path.parent.name
    shutil.copytree(path.parent, work)
    nb = nbformat.read(str(work / path.name), as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(work)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    seconds = time.perf_counter() - start
    print(f"{path.parent.name}: {seconds:.1f} s")
    for cell in nb.cells:
        if cell.cell_type == "code":
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert not errors, f"{path.name} cell {cell.metadata['nbgrader']['grade_id']}: {errors[0]['ename']}"
