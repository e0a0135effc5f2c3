"""abort_request takes a waiting request to have no tokens yet: a preempted request (waiting,
with tokens) is not found and runs on after its abort."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'abort_frees_blocks_now': ['abort_a_preempted_request']}


def abort_request(engine, request_id):
    for req in list(engine.running) + list(engine.waiting):
        if req.id == request_id and (req in engine.running or not req.tokens):   # BUG: forgets preempted ones
            finish(engine, req, FinishReason.CANCELLED, engine.clock())
            return
