"""Sizes as people write them: ``"4GiB"``, ``"512 MB"`` or a number of bytes (the memory
budgets of ``auto_shard`` and ``mt.compile``)."""
from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}


def parse_bytes(budget, what: str = "memory_budget"):
    """``"4GiB"``, ``"512 MB"`` or a number of bytes, as a float; None stays None."""
    if budget is None or isinstance(budget, (int, float)) and not isinstance(budget, bool):
        return None if budget is None else float(budget)
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(budget))
    if match is None or match[2].lower() not in _UNITS:
        raise ValueError(f"{what} {budget!r} is not a size; write e.g. \"4GiB\", \"512MB\" "
                         f"or a number of bytes")
    return float(match[1]) * _UNITS[match[2].lower()]
