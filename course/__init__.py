"""The course library: what every lab imports.

Kept small on purpose (like d2l's helper package): fixtures, the scripted model,
the fake clock, the finish-reason enum, the experiment record, plots.
"""
from . import fixtures
from .clock import FakeClock, monotonic
from .finish import FinishReason
from .records import ExperimentRecord
from .scripted import ScriptedModel, ScriptedModelError

__all__ = [
    "fixtures", "FakeClock", "monotonic", "FinishReason", "ExperimentRecord",
    "ScriptedModel", "ScriptedModelError", "load_fixture",
]


def load_fixture(name: str):
    """Shorthand for course.fixtures.load(name)."""
    return fixtures.load(name)
