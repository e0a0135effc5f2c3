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


def test_release_names_a_bad_argument_without_a_traceback(capsys):
    from autograder import release
    for argv, said in ((["lab99"], "`labNN` must be one of lab00"), (["--lang", "xx"], "invalid choice: 'xx'")):
        with pytest.raises(SystemExit) as e:
            release.main(argv)
        assert e.value.code == 2 and said in capsys.readouterr().err
