"""Write docs/reference/numpy_coverage.md: every numpy function ``__array_function__`` can
override, implemented on DTensors (and where) or refused (and why), from
``mtensor.numpy.coverage``.  ``tests/unit/test_numpy_coverage.py`` checks the page is current.

    python tools/numpy_coverage.py
"""
from pathlib import Path

import numpy as np

from mtensor.numpy import coverage

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "numpy_coverage.md"


def page() -> str:
    rows = coverage.table()
    done = sum(status == "implemented" for _, status, _ in rows)
    lines = [
        "# numpy coverage",
        "",
        f"Every function numpy {'.'.join(np.__version__.split('.')[:2])} lets `__array_function__` override, and what "
        f"a DTensor does with it: **{done} of {len(rows)} implemented**, the other "
        f"{len(rows) - done} refused with the reason below (the error a call raises names "
        "it). Ufuncs and ufunc methods are all handled through `__array_ufunc__` and are "
        "not listed. Written by `python tools/numpy_coverage.py` from "
        "`mtensor/numpy/coverage.py`; `tests/unit/test_numpy_coverage.py` fails when numpy "
        "adds a function that is in neither list.",
        "",
        "| function | on DTensors | where, or why not |",
        "|---|---|---|",
    ]
    lines += [f"| `{name}` | {status} | {'`' + where + '`' if status == 'implemented' else where} |"
              for name, status, where in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE.write_text(page())
    print(f"wrote {PAGE}")
