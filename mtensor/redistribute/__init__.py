"""Redistribution: a pure planner (placements A -> B as steps), a cost model, an executor."""
from ..cost.model import CostModel, bus_bytes, get_cost_model, set_cost_model
from .plan import Plan, Step, plan_cache_info, plan_redistribute

__all__ = [
    "CostModel",
    "Plan",
    "Step",
    "bus_bytes",
    "get_cost_model",
    "plan_cache_info",
    "plan_redistribute",
    "set_cost_model",
]
