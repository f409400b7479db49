"""Observability: what really ran."""
from .comm_mode import CommDebugMode, CommRecord
from .explain import Explanation, explain

__all__ = ["CommDebugMode", "CommRecord", "Explanation", "explain"]
