"""Student-like solutions that prove each grader: bug_*.py must fail the cases
named in their EXPECT_FAIL; correct_*.py must pass everything."""
