"""Which labs exist, and what each grader grades, has one answer.

* autograder/graders/, solutions/ and labs/ name the same labs;
* every grader declares `API = {name: "(signature)"}`, and each signature equals the
  stub's signature in the release notebook labs/labNN/labNN.ipynb (inspect.signature);
* every declared function is called by at least one case, and every stub is declared.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from autograder import get_tests, labs
from autograder.notebook import read

ROOT = Path(__file__).resolve().parents[1]


def _lab_dirs(folder: str) -> set[str]:
    return {p.name for p in (ROOT / folder).glob("lab[0-9][0-9]") if p.is_dir()}


def test_graders_solutions_and_release_name_the_same_labs():
    graded, sources, released = set(labs()), _lab_dirs("solutions"), _lab_dirs("labs")
    assert graded == sources, f"graders {sorted(graded ^ sources)} have no solution notebook, or the reverse"
    assert sources == released, f"solutions and labs disagree: {sorted(sources ^ released)} (run make release)"
    for lab in sorted(sources):
        assert (ROOT / "solutions" / lab / f"{lab}.ipynb").is_file(), f"solutions/{lab}/{lab}.ipynb is missing"
        assert (ROOT / "labs" / lab / f"{lab}.ipynb").is_file(), f"labs/{lab}/{lab}.ipynb is missing"
        assert (ROOT / "autograder" / "reference" / f"{lab}.py").is_file(), f"no reference for {lab}"
        assert any((ROOT / "autograder" / "variants" / lab).glob("bug_*.py")), f"no bug variant for {lab}"


def _stubs(lab: str) -> dict[str, inspect.Signature]:
    """Signatures of the public functions defined in the release's solution (stub) cells."""
    out = {}
    for cell in read(ROOT / "labs" / lab / f"{lab}.ipynb").cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                out[node.name] = _signature(node)
    return out


def _signature(node: ast.FunctionDef) -> inspect.Signature:
    """inspect.signature of a def with its body and decorators dropped (defaults are evaluated)."""
    bare = ast.FunctionDef(name=node.name, args=node.args, body=[ast.Pass()], decorator_list=[], returns=None)
    module = ast.fix_missing_locations(ast.Module(body=[bare], type_ignores=[]))
    ns: dict = {}
    exec(compile(module, "<stub>", "exec"), {"math": __import__("math")}, ns)
    return inspect.signature(ns[node.name])


def _declared(sig_text: str) -> inspect.Signature:
    return _signature(ast.parse(f"def f{sig_text}: pass").body[0])


@pytest.mark.parametrize("lab", labs())
def test_grader_api_matches_release_stubs(lab):
    module = importlib.import_module(f"autograder.graders.{lab}")
    api = getattr(module, "API", None)
    assert isinstance(api, dict) and api, f"autograder/graders/{lab}.py declares no API = {{name: '(signature)'}}"
    stubs = _stubs(lab)
    for name, text in api.items():
        assert name in stubs, f"{lab}: the grader grades {name}, which the release has no stub for"
        assert str(_declared(text)) == str(stubs[name]), \
            f"{lab}.{name}: grader declares {text}, the release stub is {stubs[name]}"
    undeclared = set(stubs) - set(api)
    assert not undeclared, f"{lab}: stubs {sorted(undeclared)} are not in the grader's API declaration"


@pytest.mark.parametrize("lab", labs())
def test_every_declared_function_is_graded(lab):
    module = importlib.import_module(f"autograder.graders.{lab}")
    module_file = ROOT / "autograder" / "graders" / f"{lab}.py"
    if module_file.is_file():
        source = module_file.read_text(encoding="utf-8")
        after_api = source.split("API = ", 1)[-1].split("\n}\n", 1)[-1]
    else:   # a package of pytest graders: its probes (and the tests naming them) call the student's functions
        after_api = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "autograder" / "graders" / lab)
                                                                           .glob("*.py")) if p.name != "__init__.py")
    for name in getattr(module, "API", {}):
        assert f'"{name}"' in after_api, f"{lab}: no probe calls {name} by name"
    assert get_tests(lab), f"{lab} has no TESTS"


def _load(name: str, path: Path):
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_new_lab_scaffold_is_a_working_lab(tmp_path, monkeypatch):
    """`make new-lab` writes every piece, and they agree: the solution earns full marks,
    the stub nothing, the bug variant fails what it names, the correct variant passes, and
    the grader's API equals the notebook stub's signature."""
    import sys

    import autograder.reference
    from autograder import plugin, run_test
    from autograder.new_lab import scaffold
    from autograder.notebook import extract, namespace

    lab = "lab99"
    written = {p.relative_to(tmp_path).as_posix() for p in scaffold(lab, "A test lab", tmp_path)}
    graders = tmp_path / "autograder" / "graders" / lab
    assert {f"solutions/{lab}/{lab}.ipynb", f"autograder/graders/{lab}/__init__.py",
            f"autograder/graders/{lab}/probes.py", f"autograder/graders/{lab}/test_clip_logits.py",
            f"autograder/reference/{lab}.py",
            f"course/syllabus/{lab}.md", f"course/glossary/{lab}.md",
            f"datasets/generators/fixtures_{lab}.py"} <= written
    with pytest.raises(FileExistsError):
        scaffold(lab, "again", tmp_path)  # never overwrites

    try:
        ref = _load(f"autograder.reference.{lab}", tmp_path / "autograder" / "reference" / f"{lab}.py")
        monkeypatch.setattr(autograder.reference, lab, ref, raising=False)
        grader = _load(f"autograder.graders.{lab}", graders / "__init__.py")
        _load(f"autograder.graders.{lab}.probes", graders / "probes.py")   # what the plugin runs as probes
        tests = list(plugin.collect(lab, folder=graders).values())          # the pytest graders, collected
        assert [t.name for t in tests] == ["clip_logits_clips"] and len(tests[0].cases) == 3
        nb_path = tmp_path / "solutions" / lab / f"{lab}.ipynb"
        nb = read(nb_path)
        graded = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata["nbgrader"].get("grade")}
        solution_ns = namespace(extract(nb).code, str(nb_path))
        stub_ns = namespace("import math\n" + __import__("autograder.new_lab").new_lab.STUB
                            + "    raise NotImplementedError()\n", "stub")
        for test in tests:
            assert float(graded[test.name].metadata["nbgrader"]["points"]) == test.points
            assert run_test(test, solution_ns).score == test.points
            assert run_test(test, stub_ns).score == 0
        variants = tmp_path / "autograder" / "variants" / lab
        for path in sorted(variants.glob("*.py")):
            module = _load(f"variant_{lab}_{path.stem}", path)
            ns = namespace(path.read_text(encoding="utf-8"), str(path))
            for test in tests:
                result = {c.name: c.passed for c in run_test(test, ns).cases}
                if path.name.startswith("correct_"):
                    assert all(result.values()), f"{path.name}: {result}"
                else:
                    assert not any(result[c] for c in module.EXPECT_FAIL[test.name]), f"{path.name}: {result}"
        stub = next(n for c in nb.cells if c.cell_type == "code" and c.metadata["nbgrader"].get("solution")
                    for n in ast.parse(c.source).body if isinstance(n, ast.FunctionDef))
        for name, text in grader.API.items():
            assert name == stub.name and str(_declared(text)) == str(_signature(stub))
    finally:
        for name in [m for m in sys.modules if m == lab or m.startswith((f"{lab}.", f"autograder.graders.{lab}"))]:
            sys.modules.pop(name, None)
        sys.modules.pop(f"autograder.reference.{lab}", None)
        for cache in (plugin._TESTS, plugin._FILES, plugin._PROBES, plugin._FOLDERS):
            cache.pop(lab, None)
