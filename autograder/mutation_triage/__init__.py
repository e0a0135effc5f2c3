"""Per-lab triage of surviving mutants, merged into autograder.mutation's EQUIVALENT and GAPS."""
