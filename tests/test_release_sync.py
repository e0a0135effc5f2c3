"""labs/ is exactly what `nbgrader generate_assignment` makes from solutions/."""
import pytest

from autograder.release import release_to
from notebooks import ROOT, lab_names, read

VOLATILE_NB_META = {"widgets"}


def normalise(nb):
    nb.metadata = {k: v for k, v in nb.metadata.items() if k not in VOLATILE_NB_META}
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells], dict(nb.metadata)


@pytest.mark.slow
def test_labs_match_a_fresh_nbgrader_release(tmp_path):
    labs = lab_names()
    generated = release_to(labs, tmp_path)
    for lab in labs:
        want = sorted(p.name for p in (generated / lab).iterdir())
        have = sorted(p.name for p in (ROOT / "labs" / lab).iterdir())
        assert have == want, f"labs/{lab} files {have} != generated {want}: run `make release`"
        for name in want:
            if name.endswith(".ipynb"):
                assert normalise(read(ROOT / "labs" / lab / name)) == normalise(read(generated / lab / name)), \
                    f"labs/{lab}/{name} differs from the nbgrader release: run `make release` (never edit labs/)"
