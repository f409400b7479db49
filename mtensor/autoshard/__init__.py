"""Whole-graph sharding search (``mt.auto_shard``): annotate a few tensors, the search
places the rest.  The recorder and the plan run on DTensors; the graph, the problem, the
solver, the bill and the explanation are pure (no MPI)."""
from .api import auto_shard, parse_bytes, shard_hint
from .graph import GraphBuilder, StepGraph
from .plan import Plan
from .search import Solution, diagnose_pins, search

__all__ = ["GraphBuilder", "Plan", "Solution", "StepGraph", "auto_shard", "diagnose_pins",
           "parse_bytes", "search", "shard_hint"]
