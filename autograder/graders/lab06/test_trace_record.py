"""trace_record(spans, *, tokenizer_version): the hidden cases of the cell trace_record_keeps_what_matters.

Each record must satisfy datasets/schemas/trace_record.schema.json and equal the reference's
record of the same spans (probes.build_spans of one request), field by field."""
from __future__ import annotations

import pytest

from autograder.checks import result_of
from autograder.core import Fail, describe
from autograder.reference import lab06 as ref

from .judging import case, records, same
from .probes import TOKENIZER, build_spans

pytestmark = pytest.mark.cell("trace_record_keeps_what_matters",
                              description="trace_record: a schema-valid record of one request, read from its spans")

PATH_IDS = [f"r{i:02d}" for i in range(9)]


def row(name, set_name, ids, *, points=1, visible=False):
    return case(name, set_name, ids, probe=("trace_records", set_name, ids), points=points, visible=visible,
                fixture=set_name)


def check_the_validator(record: dict) -> None:
    """Grader integrity: the schema check must flag a record with one wrong field, naming it
    (a validator that accepts everything would pass any record)."""
    broken = {**record, "ttft_s": "soon"}
    problem = ref.validate_record(broken)
    if problem is None or "ttft_s" not in problem:
        raise Fail("grader error: the trace-record schema check does not flag a record whose ttft_s is a string",
                   got=problem, hint="This is a fault in the grader, not in your code: tell the course staff.")


@pytest.mark.parametrize("name, ids", [
    row("stop_request_record", "trace_paths", ["r00"], visible=True),
    row("every_ending", "trace_paths", PATH_IDS, points=2),
    row("cancelled_in_queue", "trace_queue_cancel", ["r05"]),
])
def test_record(observation, name, ids):
    """Schema-valid, and equal to the reference's record of the same request."""
    for rid, got in zip(ids, records(observation, len(ids))):
        got = result_of({"result": got}, f"trace_record(<spans of {rid}>)")
        problem = ref.validate_record(got)
        if problem is not None:
            raise Fail(f"the trace record of {rid!r} does not satisfy the schema ({problem})", got=describe(got),
                       hint="datasets/schemas/trace_record.schema.json lists every field; a value that does "
                            "not exist is null, never 0.")
        expected = ref.trace_record(build_spans(name, {rid}), tokenizer_version=TOKENIZER)
        check_the_validator(expected)
        for key, ev in expected.items():
            gv = got.get(key)
            ok = same(ev, gv) if isinstance(ev, float) or (ev is None) else ev == gv
            if not ok:
                raise Fail(f"field {key!r} of the trace record of {rid!r} is wrong", expected=ev, got=gv)
