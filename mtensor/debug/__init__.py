"""Observability: what really ran."""
from .comm_mode import CommDebugMode, CommRecord

__all__ = ["CommDebugMode", "CommRecord"]
