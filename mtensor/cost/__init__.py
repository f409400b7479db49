"""The cost model, pure: the price list (alpha-beta per collective and link: ``model``) and
the timeline a scheduled step is predicted to take (``timeline``).  Every layer that
chooses (the sharding chooser, the planner, bucketing, auto_shard) reads prices here."""
from .model import CostModel, bus_bytes, get_cost_model, set_cost_model

__all__ = ["CostModel", "bus_bytes", "get_cost_model", "set_cost_model"]
