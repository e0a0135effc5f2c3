"""Lab 03 run results: what the course's generation loop returns for the run specs whose
result the lab03 graders hand to the student's accept_tool_call and accept_with_retries.

Those probes run in the student's process, where course.generation and course.acceptance
(Lab 03's answers) are out of reach, so they read the results from lab03_runs.json
instead of running the loop. The specs are the graders' COURSE_RUN_SPECS; the results
come from course.acceptance.run_spec, so `make_fixtures.py --check` (and tests/test_fixtures.py)
fails as soon as the course loop would answer differently. The runs read the logit
fixtures on disk: after changing one of those, run `make fixtures` twice.
"""
from __future__ import annotations

from fixture_lib import dumps_listed

FIXTURES: list = []


def course_runs() -> list[dict]:
    """[{"spec": spec, "result": GenerationResult.to_dict()}] for every spec of COURSE_RUN_SPECS, in order."""
    from autograder.graders.lab03 import COURSE_RUN_SPECS
    from course.acceptance import run_spec

    return [{"spec": spec, "result": run_spec(spec).to_dict()} for spec in COURSE_RUN_SPECS]


def dumps(runs: list[dict]) -> str:
    head = {"name": "lab03_runs", "schema_version": "lab03_runs/1",
            "description": "the course loop's results of the lab03 graders' COURSE_RUN_SPECS"}
    return dumps_listed(head, "runs", runs, sort_keys=True)


_RUNS = course_runs()

EXTRA_FILES = {"lab03_runs.json": dumps(_RUNS)}

README_SECTION = f"""
## Course-loop results (lab03)

| name | runs | exercises | description |
| --- | --- | --- | --- |
| `lab03_runs` | {len(_RUNS)} | structured_output, retries | the course loop's results of the lab03 graders' run specs |

`lab03_runs.json`: for each run spec of `COURSE_RUN_SPECS` (autograder/graders/lab03.py),
the `GenerationResult.to_dict()` that `course.acceptance.run_spec` returns. The lab03
probes hand these results to the student's `accept_tool_call` and `accept_with_retries`
without running the course loop in the student's process. Not a logit fixture.
"""
