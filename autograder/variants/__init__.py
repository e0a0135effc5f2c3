"""Student-like solutions that prove each grader: bug_*.py must fail the cases
named in their EXPECT_FAIL; correct_*.py must pass everything.

A variant is the code a student would write into the lab's solution cells
(autograder.tests.submissions.from_variant spreads it over the release notebook by
name). A bug variant holds only what differs from a correct solution:

* it imports the functions it keeps from autograder.reference.labNN (the submission
  then carries a pasted copy of the reference), or
* it sets `BASE = "solution"`: every solution cell keeps the solution notebook's code
  and the variant's definitions follow it in the cell of the same name, so they replace
  the solution's. A bug inside one method is a subclass of the solution's class with the
  same name, overriding that method (`class PagedKVCache(PagedKVCache): def gather...`).
  Such a file is a patch: it does not run on its own.

`pytest autograder/variants` grades every variant once (proving.grade, in this
process) and reports one item per case it proves: a case of a bug
variant's EXPECT_FAIL is xfail(strict=True), every case of a correct variant must pass.
"""
