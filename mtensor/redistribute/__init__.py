"""Redistribution: a pure planner (placements A -> B as the cheapest chain of one-mesh-dim
steps, priced by ``cost``: ``plan``) and the executor that binds a plan to this rank and runs
it through ``comm`` (``execute``)."""
from .plan import Plan, Step, plan_cache_info, plan_redistribute

__all__ = ["Plan", "Step", "plan_cache_info", "plan_redistribute"]
