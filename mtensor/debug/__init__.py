"""Observability: what really ran."""
from .comm_mode import CommDebugMode, CommRecord
from .explain import Explanation
from .region import region
from .tape_bytes import tape_bytes
from .visualize import visualize_sharding

__all__ = ["CommDebugMode", "CommRecord", "Explanation", "region", "tape_bytes",
           "visualize_sharding"]
