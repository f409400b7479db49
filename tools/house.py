"""The house of ``mtensor/``, read from its source with ``ast``: which layer each module
sits in, the imports between modules, the floors they stack into, and the imports that run
back up a layer.  ``tests/unit/test_layers.py`` holds the house rules with it;
``python tools/house.py`` prints the report a reviewer reads.

Importing ``mtensor.a.b`` also runs the package ``mtensor.a``'s ``__init__``, so that counts
as an import of the package too.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mtensor"

# Each folder (or top-level module) of mtensor/ sits in one layer and imports only from the
# same layer or below; ../shared/DESIGN.md has the same table.
LAYERS = [
    ("values", ["mtensor.placement", "mtensor.spec", "mtensor.step_kinds", "mtensor.modes",
                "mtensor.pytree", "mtensor.version", "mtensor.testing.fakecupy"]),
    ("substrate", ["mtensor.device", "mtensor.cost", "mtensor.comm", "mtensor.ops",
                   "mtensor.fusion"]),
    ("decisions bound to ranks", ["mtensor.mesh", "mtensor.redistribute", "mtensor.overlap"]),
    ("the tensor", ["mtensor.views", "mtensor.dtensor", "mtensor.dispatch", "mtensor.decide",
                    "mtensor.operands", "mtensor.elision",
                    "mtensor.debug", "mtensor.halo"]),
    ("numpy's API", ["mtensor.numpy", "mtensor.random", "mtensor.array_api"]),
    ("programs", ["mtensor.autodiff", "mtensor.optim", "mtensor.trace_compile",
                  "mtensor.autoshard", "mtensor.checkpoint", "mtensor.pipeline",
                  "mtensor.testing"]),
    ("the public package", ["mtensor"]),
]


def modules(package: Path = PACKAGE) -> dict:
    """Every module of the package by dotted name, with its file."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def layer_of(module: str) -> int:
    """The layer of the longest listed prefix of ``module`` (the root package only for
    itself, so a new top-level module must be placed in a layer)."""
    best, level = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            prefix = name != "mtensor" and module.startswith(name + ".")
            if (module == name or prefix) and len(name) > best:
                best, level = len(name), i
    if level is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS in tools/house.py")
    return level


def _absolute(module: str, node: ast.ImportFrom) -> str:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    return base


def targets(module: str, node) -> list:
    """The package modules an import statement of ``module`` runs."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _absolute(module, node)
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


def imports(module: str):
    """(statement, in a function?) for every import statement of ``module``."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))

    def walk(node, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, nested
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from walk(child, inner)
    yield from walk(tree, False)


def import_graph() -> dict:
    return {m: {t for node, _ in imports(m) for t in targets(m, node)} for m in MODULES}


def arrows_up(graph: dict) -> list:
    return [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
            for m, ts in sorted(graph.items()) for t in sorted(ts)
            if layer_of(t) > layer_of(m)]


def circles(graph: dict) -> list:
    state, found = {}, []

    def visit(module, trail):
        state[module] = "open"
        for t in sorted(graph[module]):
            if state.get(t) == "open":
                found.append(" -> ".join(trail[trail.index(t):] + [t]))
            elif t not in state:
                visit(t, trail + [t])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def floors(graph: dict) -> dict:
    """Each module's floor: 0 for a module importing nothing of the package, else one above
    the highest module it imports (the longest chain of imports below it)."""
    memo: dict = {}

    def floor(m, seen=()):
        if m not in memo:
            below = [floor(t, seen + (m,)) for t in graph[m] if t not in seen]
            memo[m] = 1 + max(below) if below else 0
        return memo[m]
    return {m: floor(m) for m in graph}


def private_imports() -> list:
    """``from x import _name`` of a module other than the importer's own package."""
    out = []
    for m in MODULES:
        for node, _ in imports(m):
            if isinstance(node, ast.ImportFrom):
                out += [f"{m} imports {_absolute(m, node)}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def nested_imports() -> list:
    """Imports of package modules inside a function (a hidden edge, usually a circle)."""
    return [f"{m}:{node.lineno} imports {', '.join(targets(m, node))}"
            for m in MODULES for node, nested in imports(m)
            if nested and targets(m, node)]


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def report() -> str:
    graph = import_graph()
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    rooms = sorted({m.split(".")[1] for m in MODULES if m.count(".") >= 1
                    and MODULES[m].parent != PACKAGE})
    level = floors(graph)
    sizes = sorted(((lines(p), m) for m, p in MODULES.items()), reverse=True)
    out = [f"top of mtensor/: {len(top)} .py files; rooms (folders): {len(rooms)} "
           f"({', '.join(rooms)})",
           f"floors: {max(level.values()) + 1} (longest import chain)",
           f"files over 300 lines: {sum(n > 300 for n, _ in sizes)}, over 400: "
           f"{sum(n > 400 for n, _ in sizes)}; largest: {sizes[0][1]} ({sizes[0][0]})",
           f"imports of another module's _private name: {len(private_imports())}",
           f"function-level imports of package modules: {len(nested_imports())}",
           f"circles: {len(circles(graph))}"]
    up = arrows_up(graph)
    out += [f"arrows up: {len(up)}"] + [f"  {a}" for a in up]
    by_layer: dict = {}
    for m in MODULES:
        by_layer.setdefault(layer_of(m), []).append(m)
    for i, (name, _) in reversed(list(enumerate(LAYERS))):
        ms = sorted(by_layer.get(i, []))
        out.append(f"layer {i} {name}: {len(ms)} modules, floors "
                   f"{min(level[m] for m in ms)}-{max(level[m] for m in ms)}" if ms else
                   f"layer {i} {name}: empty")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(print(report()))
