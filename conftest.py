"""Fixtures shared by tests/ and autograder/tests/."""
import pytest


@pytest.fixture(scope="session")
def nbgrader_corpus(tmp_path_factory):
    """One real nbgrader run over every lab and every kind of submission, shared by the slow
    tests that need nbgrader's verdicts (see autograder/tests/nbgrader_corpus.py)."""
    from autograder.tests.nbgrader_corpus import graded_corpus
    return graded_corpus(tmp_path_factory.mktemp("nbgrader-corpus"))
