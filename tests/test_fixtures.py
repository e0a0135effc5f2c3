"""Fixtures: reproducible generator, valid schema, clear loading errors."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import course
from course import fixtures

ROOT = Path(__file__).resolve().parents[1]
GEN = ROOT / "datasets" / "generators" / "make_fixtures.py"

REQUIRED = ["peaked", "flat", "ties", "top_p_exact_boundary", "eos_at_step_3", "stop_string_2_tokens",
            "stop_string_3_tokens", "stop_string_diverges", "json_cut_by_max_tokens", "json_tool_call_ok",
            "nan_logits", "pos_inf_logit"]


def test_generator_reproduces_committed_files_byte_for_byte(tmp_path):
    out = tmp_path / "fixtures"
    subprocess.run([sys.executable, str(GEN), "--out", str(out)], check=True, capture_output=True)
    committed = sorted(p.name for p in fixtures.FIXTURES_DIR.iterdir() if p.suffix in (".json", ".md"))
    generated = sorted(p.name for p in out.iterdir())
    assert generated == committed
    for name in generated:
        assert (out / name).read_bytes() == (fixtures.FIXTURES_DIR / name).read_bytes(), \
            f"{name} differs from what `make fixtures` writes: run `make fixtures` and commit"


def test_check_mode_reports_a_stale_file(tmp_path):
    out = tmp_path / "fixtures"
    subprocess.run([sys.executable, str(GEN), "--out", str(out)], check=True, capture_output=True)
    (out / "peaked.json").write_text("{}", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(GEN), "--check", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 1 and "stale: peaked.json" in proc.stdout


@pytest.mark.parametrize("name", REQUIRED)
def test_required_fixture_exists_and_is_valid(name):
    fx = fixtures.load(name)
    assert fx.n_steps >= 1 and fx.vocab_size >= 2
    assert fx.logits().shape == (fx.n_steps, fx.vocab_size)


def test_every_fixture_is_listed_in_the_readme():
    readme = (fixtures.FIXTURES_DIR / "README.md").read_text(encoding="utf-8")
    for name in fixtures.available():
        assert f"| `{name}` |" in readme


def test_top_p_boundary_is_exact_in_float32():
    fx = fixtures.load("top_p_exact_boundary")
    probs = torch.softmax(fx.logits(0), dim=-1)
    top = torch.sort(probs, descending=True).values
    assert top.cumsum(0)[1].item() == 0.75 and fx.params["top_p"] == 0.75


def test_ties_fixture_has_an_exact_tie_at_the_top():
    row = fixtures.load("ties").logits(0)
    assert (row == row.max()).sum() == 2


def test_non_finite_values_round_trip():
    assert math.isnan(fixtures.load("nan_logits").logits(0)[4])
    assert fixtures.load("pos_inf_logit").logits(0)[5] == math.inf
    assert (fixtures.load("masked_logits").logits(0) == -math.inf).sum() == 2


def test_stop_string_fixtures_spell_the_stop_string_across_tokens():
    for name, n_tokens in (("stop_string_2_tokens", 2), ("stop_string_3_tokens", 3)):
        fx = fixtures.load(name)
        greedy = fx.logits().argmax(-1).tolist()
        stop = fx.params["stop"][0]
        text = fx.decode(greedy)
        assert stop in text
        assert not any(stop in fx.vocab[t] for t in greedy), "the stop string must span tokens"
        # the shortest run of tokens that contains it has n_tokens tokens
        pieces = [fx.vocab[t] for t in greedy]
        spans = [j - i for i in range(len(pieces)) for j in range(i + 1, len(pieces) + 1)
                 if stop in "".join(pieces[i:j])]
        assert min(spans) == n_tokens


def test_json_fixtures_complete_and_cut():
    ok = fixtures.load("json_tool_call_ok")
    ids = ok.logits().argmax(-1).tolist()
    assert ids[-1] == ok.eos_token_id
    json.loads(ok.decode(ids[:-1]))
    cut = fixtures.load("json_cut_by_max_tokens")
    text = cut.decode(cut.logits().argmax(-1).tolist()[: cut.params["max_tokens"]])
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_load_errors_name_the_parameter():
    with pytest.raises(ValueError, match=r"`name` 'no_such' is not a fixture"):
        fixtures.load("no_such")
    with pytest.raises(ValueError, match="`name` must be"):
        fixtures.load("")
    with pytest.raises(ValueError, match=r"`step` must be an integer in \[0, 0\], got 3"):
        fixtures.load("peaked").logits(3)


def test_logits_are_fresh_copies():
    fx = course.load_fixture("peaked")
    a = fx.logits(0)
    a += 100
    assert not torch.equal(a, fx.logits(0))


def test_from_dict_rejects_rows_of_the_wrong_length():
    raw = json.loads((fixtures.FIXTURES_DIR / "peaked.json").read_text())
    raw["steps"][0] = raw["steps"][0][:-1]
    with pytest.raises(ValueError, match=r"`steps\[0\]` has 7 logits, expected len\(vocab\) = 8"):
        fixtures.from_dict(raw)
