"""What a benchmark script hands benchmarks/run.py: its markdown lines (printed too) and the
numbers behind them, as JSON at ``--json PATH`` (written by rank 0)."""
import json


def emit(path, lines, numbers):
    """Print ``lines``; with a ``path``, write them and ``numbers`` there as JSON."""
    print("\n".join(lines))
    if path:
        with open(path, "w") as f:
            json.dump({"lines": lines, "numbers": numbers}, f)
