"""Test aids shipped with mtensor: the strict fake CuPy (``fakecupy``, which imports nothing
of mtensor) and ``check_rule`` (``rules``: a sharding rule simulated on every block of a
mesh), loaded only when asked for."""


def __getattr__(name):
    if name == "check_rule":
        from .rules import check_rule
        return check_rule
    raise AttributeError(f"module 'mtensor.testing' has no attribute {name!r}")
