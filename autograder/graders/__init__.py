"""One package per lab: its hidden graders as pytest tests (see autograder/plugin.py)."""
import pkgutil


def labs() -> list[str]:
    """Labs that have graders (the packages labNN/ here), without importing any of them:
    core.labs, and the command line before it imports torch."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("lab") and m.ispkg)
