"""One package per lab: its hidden graders as pytest tests (see autograder/plugin.py)."""
