"""Chrome trace / Perfetto JSON of a compiled step's latest replay, one process per rank.

Compute spans go on thread 0, collectives (start to the end of the wait, or the blocking
call) on thread 1, so an overlapped collective shows beside the compute that hid it.  Times
are microseconds from the earliest span of any rank (one machine's monotonic clock: ranks on
several hosts are only roughly aligned).
"""
from __future__ import annotations

import json

_THREADS = {"compute": 0, "collective": 1}


def export_trace(traced, path) -> None:
    mesh = traced.graph.mesh
    if mesh is None:
        raise ValueError(f"export_trace: {traced.graph.name} takes and returns no DTensor, "
                         f"so there is no mesh whose ranks to gather")
    spans = traced.replay.spans
    if not spans and traced.graph.nodes:
        raise RuntimeError(f"export_trace: {traced.graph.name} has not been replayed yet (its "
                           f"first call traces it); call it again, then export")
    every = mesh.communicator().allgather_object(spans)
    if mesh.comm.rank != 0:
        return
    origin = min((s[2] for rank_spans in every for s in rank_spans), default=0.0)
    events = []
    for rank, rank_spans in enumerate(every):
        events.append({"name": "process_name", "ph": "M", "pid": rank,
                       "args": {"name": f"rank {rank}"}})
        for name, category, start, end in rank_spans:
            events.append({"name": name, "cat": category, "ph": "X", "pid": rank,
                           "tid": _THREADS[category], "ts": (start - origin) * 1e6,
                           "dur": (end - start) * 1e6})
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
