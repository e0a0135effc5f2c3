"""lab06's mutation triage (see autograder/mutation.py): survivors read by hand.

EQUIVALENT: no correct solution can be told apart from the mutant (the reason).
GAPS: a clause no hidden case exercises yet (what a case would have to do).
Keys are (module, the mutated line as mutmut writes it, stripped), as in mutation.EQUIVALENT.
"""

EQUIVALENT: dict[tuple[str, str], str] = {}

GAPS: dict[tuple[str, str], str] = {}
