"""Attacks on what the grader measures (labs 05 and 07), and the checks that no expected
value and no ungated answer is within the student's reach.

Each lab05_*/lab07_* file is a submission in the form of a bug variant (BASE = "solution":
the solution notebook with these functions replaced). `leak` files hold a bug; a
`leak_lying_*` file holds the same bug plus an attack on how the grader measures it, and
must score no more than the bug alone (test_measures.py)."""
