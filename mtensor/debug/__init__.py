"""Observability: what really ran."""
from .comm_mode import CommDebugMode, CommRecord
from .explain import Explanation
from .visualize import visualize_sharding

__all__ = ["CommDebugMode", "CommRecord", "Explanation", "visualize_sharding"]
