"""Dead-code elimination: compute nodes none of whose results is read later or returned.

Effects and collectives always stay (an effect writes memory something else reads; every
rank must run every collective).  Bit for bit: removing unread values changes nothing.
"""
from __future__ import annotations

from dataclasses import replace


def run(graph):
    live = {s for s, _ in graph.outputs if s is not None}
    kept = []
    for node in reversed(graph.nodes):
        if node.kind == "compute" and not live.intersection(node.outs):
            continue
        live.update(node.ins)
        kept.append(node)
    kept.reverse()
    removed = len(graph.nodes) - len(kept)
    return replace(graph, nodes=kept), {"removed": removed} if removed else {}
