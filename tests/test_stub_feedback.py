"""A function that is still the stub (raises NotImplementedError) is reported as not written
yet, in both languages: never as a wrong answer with "expected ... got NotImplementedError"."""
import pytest

from autograder import reports
from autograder.checks import rejects, result_of
from autograder.core import Fail, get_tests, raised, run_test

STUB = {"result": raised(NotImplementedError())}


def _stub(*args, **kwargs):
    raise NotImplementedError()


def test_result_of_a_stub_has_nothing_to_compare():
    with pytest.raises(Fail) as e:
        result_of(STUB, "bucket_counts([0.1], edges)", "a hint about buckets", expected=[1, 0])
    assert e.value.message == "bucket_counts([0.1], edges) is not implemented yet (the stub still raises " \
                              "NotImplementedError)"
    assert (e.value.expected, e.value.got) == (None, None)
    assert "NotImplementedError()" in e.value.hint


def test_a_stub_asked_to_reject_bad_input_is_not_written_yet():
    with pytest.raises(Fail) as e:
        rejects(STUB, "percentile([], 50)", "values", [])
    assert "should raise" not in e.value.message and "is not implemented yet" in e.value.message
    assert (e.value.expected, e.value.got) == (None, None)


# lab06's percentile and histogram cells: visible and hidden cases judge through result_of, through
# rejects (bad input) and through the probe itself; every one must read "not written yet"
@pytest.mark.parametrize("cell, names", [
    ("percentile_type_6", ["percentile"]),
    ("buckets_and_histogram_percentile", ["bucket_counts", "histogram_percentile"]),
])
@pytest.mark.parametrize("lang, not_yet, expected_word", [("en", "not implemented yet", "expected"),
                                                          ("zh", "还没有实现", "期望")])
def test_every_case_of_a_stub_says_not_written_yet(cell, names, lang, not_yet, expected_word):
    result = run_test(get_tests("lab06")[cell], {n: _stub for n in names})
    assert result.cases and not any(c.passed for c in result.cases)
    for c in result.cases:
        assert (c.expected, c.got) == (None, None), c
        line = reports.case_line(c, lang=lang)
        assert not_yet in line, line
        assert expected_word not in line and "NotImplementedError()" in line, line
