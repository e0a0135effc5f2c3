"""One module per lab: TESTS, a list of autograder.core.Test."""
