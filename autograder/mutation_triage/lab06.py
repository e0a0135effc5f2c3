"""lab06's mutation triage (see autograder/mutation.py): survivors read by hand.

EQUIVALENT: no correct solution can be told apart from the mutant (the reason).
GAPS: a clause no hidden case exercises yet (what a case would have to do).
Keys are (module, the mutated line as mutmut writes it, stripped), as in mutation.EQUIVALENT.
"""

EQUIVALENT: dict[tuple[str, str], str] = {
    # course.tracing guards the course API (RequestTracer) against attributes OpenTelemetry cannot
    # store. lab06's contract (spans_from_events' docstring) asks no error for them, and the SDK
    # itself drops such an attribute with a warning, so a correct submission may do either: no
    # case can judge it, as with the event kinds the contract does not list
    ("course.tracing", "return True"):
        "_attr_value_ok: differs only for an attribute value that is not a str, bool, int, finite float "
        "or a list of them, which lab06's contract neither passes nor asks to reject",
    ("course.tracing", "if not isinstance(k, str) and not k:"):
        "_check_attributes: differs only for an attribute key that is empty or not a string, which lab06's "
        "contract neither passes nor asks to reject",
}

# the survivors of the last full run that were read as gaps are killed by hidden cases now
# (--recheck: 25 of 27; the other two are the EQUIVALENT entries above)
GAPS: dict[tuple[str, str], str] = {}
