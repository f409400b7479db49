"""The package's layering, read from its source with ``ast``: every import (module level or
inside a function) goes to the same layer or a lower one, and no module reaches itself.

Importing ``mtensor.a.b`` also runs the package ``mtensor.a``'s ``__init__``, so that counts
as an import of the package too.  The layers, bottom first (the README's "Layout of the
code" lists the same):
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mtensor"

LAYERS = [
    # 0. pure data and the mode slots: no MPI, no DTensor
    ["mtensor.placement", "mtensor.steps", "mtensor.modes", "mtensor.buffers",
     "mtensor.pytree", "mtensor.device", "mtensor.version", "mtensor.topology"],
    # 1. planning: specs, sharding rules, plans, cost model, graph passes (no MPI)
    ["mtensor.spec", "mtensor.ops", "mtensor.redistribute.cost", "mtensor.redistribute.plan",
     "mtensor.redistribute", "mtensor.trace_compile", "mtensor.trace_compile.graph",
     "mtensor.trace_compile.tracer", "mtensor.overlap", "mtensor.overlap.bucketing",
     "mtensor.overlap.schedule", "mtensor.debug.visualize", "mtensor.debug.price",
     "mtensor.debug", "mtensor.debug.comm_mode", "mtensor.debug.explain",
     "mtensor.autodiff", "mtensor.autoshard.graph", "mtensor.autoshard.problem",
     "mtensor.autoshard.solve", "mtensor.autoshard.bill", "mtensor.autoshard.search",
     "mtensor.autoshard.explain"],
    # 2. communication: the protocol and its backends (the only MPI calls); the fake CuPy,
    # whose NCCL runs over MPI
    ["mtensor.comm", "mtensor.testing"],
    # 3. meshes, and executing plans on them
    ["mtensor.mesh", "mtensor.mesh_nodes", "mtensor.redistribute.execute",
     "mtensor.redistribute.calibrate",
     "mtensor.overlap.buckets", "mtensor.overlap.replay", "mtensor.debug.trace_export"],
    # 4. the DTensor type and views of it
    ["mtensor.views", "mtensor.dtensor"],
    # 5. dispatch
    ["mtensor.dispatch"],
    # 6. numpy's API on DTensors
    ["mtensor.exchange", "mtensor.writes", "mtensor.inplace", "mtensor.numpy_api", "mtensor.numpy_shapes", "mtensor.numpy_writes",
     "mtensor.array_methods", "mtensor.creation", "mtensor.random", "mtensor.numpy_joins",
     "mtensor.numpy_diag", "mtensor.numpy_scans", "mtensor.numpy_linalg", "mtensor.numpy_select",
     "mtensor.numpy_sort", "mtensor.numpy_stats", "mtensor.numpy_nonzero",
     "mtensor.numpy_norms", "mtensor.numpy_products", "mtensor.numpy_nan", "mtensor.numpy_counting", "mtensor.numpy_sets",
     "mtensor.numpy_block"],
    # 7. programs of DTensor ops: gradients, optimizers, compile, explain
    ["mtensor.autodiff.tape", "mtensor.autodiff.vjps", "mtensor.autodiff.api",
     "mtensor.autodiff.blocks", "mtensor.autodiff.local_map", "mtensor.autodiff.custom_vjp",
     "mtensor.optim", "mtensor.trace_compile.compile", "mtensor.checkpoint",
     "mtensor.autoshard"],
    # 8. the public package
    ["mtensor"],
]


def _modules():
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    """The layer of the longest listed prefix of ``module`` (the root package only for
    itself, so a new module must be placed in a layer)."""
    best, level = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            prefix = name != "mtensor" and module.startswith(name + ".")
            if (module == name or prefix) and len(name) > best:
                best, level = len(name), i
    assert level is not None, f"{module} is in no layer: add it to LAYERS"
    return level


def _targets(module: str, node) -> list:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                 for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        parts = name.split(".")
        # importing a.b.c runs the __init__ of a.b too: an edge, unless a.b is a package
        # this module belongs to (its __init__ is already running by then)
        out += [p for p in (".".join(parts[:k]) for k in range(2, len(parts) + 1))
                if p == name or not module.startswith(p + ".")]
    return [t for t in out if t != module]


def import_graph() -> dict:
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[module] = {t for node in ast.walk(tree)
                         if isinstance(node, (ast.Import, ast.ImportFrom))
                         for t in _targets(module, node)}
    return graph


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_a_layer():
    upward = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
              for m, targets in import_graph().items() for t in sorted(targets)
              if layer_of(t) > layer_of(m)]
    assert not upward, "\n".join(upward)


def test_no_import_circle():
    graph, state, circles = import_graph(), {}, []

    def visit(module, trail):
        state[module] = "open"
        for t in sorted(graph[module]):
            if state.get(t) == "open":
                circles.append(" -> ".join(trail[trail.index(t):] + [t]))
            elif t not in state:
                visit(t, trail + [t])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, "\n".join(circles)


def test_the_walker_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "mtensor.modes" in graph["mtensor.dispatch"]
    assert "mtensor.comm.guard" in graph["mtensor.redistribute.execute"]
    assert layer_of("mtensor.ops.pointwise") < layer_of("mtensor.dispatch")
