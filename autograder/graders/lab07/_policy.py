"""lab07's later traces (sent to the sandboxed child with the probes; no reference here);
_inputs.py adds them to its TRACES.

POLICY_TRACES, the admission policy's one bound. The policy is the student's: first come, first
served, a bypass that lets smaller requests fill the free blocks, or a priority order. Whatever
it is, no waiting request may be passed by more than config.max_overtakes later arrivals; these
two traces make a policy that ignores the bound pass someone more often than that.

HELD_TRACES, text held back while the stream ends with half a character.
"""
from __future__ import annotations


def _greedy(max_tokens, **kw):
    return {"temperature": 0, "max_tokens": max_tokens, **kw}


POLICY_TRACES = {
    # Pool 14 x 1 token: while p3, p9 and p7 grow, big (10 tokens) and then q1 (3) do not fit,
    # and one-token requests keep arriving that would. With max_overtakes 2, each of big and q1
    # may be passed twice over its whole wait, however the engine chooses.
    "bypass": dict(arrivals=[(0, "p3", _greedy(8)), (0, "p9", _greedy(8)), (0, "p7", _greedy(8)),
                             (1, "big", _greedy(3)), (1, "q1", _greedy(3))]
                   + [(s, n, _greedy(3)) for s, n in ((2, "p1"), (3, "p4"), (4, "p5"), (5, "p6"), (6, "p8"),
                                                      (7, "p2"), (8, "q2"))],
                   config={"num_blocks": 14, "block_size": 1, "max_batch": 8, "watermark_blocks": 0,
                           "max_overtakes": 2}),
    # One request at a time (max_batch 1): q1 asks for a low priority (5) and waits behind p3;
    # p1, p4 (priority -1), p5 and p6 arrive after it. A priority order may pass q1 once.
    "priority": dict(arrivals=[(0, "p3", _greedy(3)), (1, "q1", _greedy(3, priority=5)), (1, "p1", _greedy(3)),
                               (2, "p4", _greedy(3, priority=-1)), (3, "p5", _greedy(3)), (4, "p6", _greedy(3))],
                     config={"num_blocks": 64, "block_size": 2, "max_batch": 1, "watermark_blocks": 0,
                             "max_overtakes": 1}),
}


HELD_TRACES = {
    # On the "bytes" text p2 is "Hel", "lo", half of "\u4e2d", its other half, "!", "!". While the
    # text is "Hello" + half a character, its "o" may begin either stop string: it is held. p2 stops
    # at "o\u4e2d!" (final text "Hell"); p2#held never sees "o\u4e2d?" and sends the "o" with "\u4e2d!".
    "held_before_half_character": dict(arrivals=[(0, "p2", _greedy(6, stop=["o\u4e2d!"])),
                                                 (0, "p2#held", _greedy(6, stop=["o\u4e2d?"]))], text="bytes",
                                       config={"num_blocks": 32, "block_size": 2, "max_batch": 8}),
}
