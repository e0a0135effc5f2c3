"""abort_request only marks the request as cancelled: it keeps running and streaming, and its
blocks stay in use until it would have ended by itself."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'abort_frees_blocks_now': ['abort_after_two_steps', 'abort_after_1_steps', 'abort_after_4_steps']}


def abort_request(engine, request_id):
    for req in list(engine.running) + list(engine.waiting):
        if req.id == request_id:
            req.cancelled = True   # BUG: marked only; it ends (and frees its blocks) when it would have anyway
            return
