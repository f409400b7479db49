"""Observability: what really ran."""
from .comm_mode import CommDebugMode, CommRecord
from .explain import Explanation
from .region import region
from .visualize import visualize_sharding

__all__ = ["CommDebugMode", "CommRecord", "Explanation", "region", "visualize_sharding"]
