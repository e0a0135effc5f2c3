"""`pytest autograder/graders/labNN --submission NB` (or --reference): the grader plugin."""
from autograder.plugin import pytest_addoption, pytest_configure  # noqa: F401
