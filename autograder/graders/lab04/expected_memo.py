"""The expected values of lab04's changed-positions cases on the tiny model, kept in _expected.pt
(see autograder/memo.py): the two token sequences and the reference's changed positions."""
from __future__ import annotations

SOURCES = ["course/tiny_model.py", "course/decoder.py", "autograder/reference/lab04.py", "autograder/toy_models.py",
           "autograder/graders/lab04/probes.py", "autograder/graders/lab04/expected_memo.py"]


def changed_on_tiny_model(key: str) -> dict:
    from autograder.checks import one_thread
    from autograder.reference import lab04 as ref

    from .probes import CHANGED, MODELS, changed_args
    model, tokens, atol = CHANGED[key]
    with one_thread():
        a, b = tokens()
        return {"a": list(a), "b": list(b),
                "expected": ref.changed_positions(*changed_args(MODELS[model](), a, b, atol))}


MEMO = {f"changed_{key}": (lambda key=key: changed_on_tiny_model(key))
        for key in ("tiny_model_change_middle_token", "change_last_token")}
