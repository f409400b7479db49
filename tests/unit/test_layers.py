"""The house rules, read from the source with ``ast`` (``tools/house.py`` walks it; run
``python tools/house.py`` for the whole report): every module sits in a layer and imports
only from its own layer or below, with no circle; the top of ``mtensor/`` stays small and
every file within its line budget; no module imports another's ``_private`` names; and
package modules are imported at module level, where the walker and a reader see them,
except the named lazy ones."""
from tools import house

LINE_BUDGET = 300
HARD_LIMIT = 400
# Files allowed past the budget (up to the hard limit), each one coherent piece
OVER_BUDGET = {
    "mtensor/dtensor.py": "the DTensor type: its constructors, reads and redistribution",
    "mtensor/mesh/device_mesh.py": "DeviceMesh and its construction over MPI and nodes",
    "mtensor/testing/fakecupy/core.py": "the strict fake CuPy's ndarray in one place",
}
# Imports of package modules inside a function: module -> why it cannot be at the top
LAZY_IMPORTS = {
    "mtensor.mesh.nodes": "comm.hierarchical loads mpi4py: only once a mesh spans nodes",
    "mtensor.testing": "testing.rules runs meshes and dispatch, while fakecupy (imported "
                       "by the device layer) must import nothing of mtensor",
}


def test_every_module_has_a_layer():
    for module in house.MODULES:
        house.layer_of(module)


def test_no_import_goes_up_a_layer():
    up = house.arrows_up(house.import_graph())
    assert not up, "\n".join(up)


def test_no_import_circle():
    found = house.circles(house.import_graph())
    assert not found, "\n".join(found)


def test_the_top_of_the_package_stays_small():
    top = sorted(p.name for p in house.PACKAGE.glob("*.py"))
    assert len(top) <= 15, top


def test_every_file_is_within_its_line_budget():
    over = []
    for module, path in house.MODULES.items():
        name = path.relative_to(house.ROOT).as_posix()
        limit = HARD_LIMIT if name in OVER_BUDGET else LINE_BUDGET
        if house.lines(path) > limit:
            over.append(f"{name}: {house.lines(path)} lines (budget {limit})")
    assert not over, "\n".join(over)


def test_the_over_budget_list_names_only_files_that_need_it():
    for name in OVER_BUDGET:
        assert house.lines(house.ROOT / name) > LINE_BUDGET, f"{name} is back in budget"


def test_no_module_imports_another_modules_private_names():
    found = house.private_imports()
    assert not found, "\n".join(found)


def test_package_modules_are_imported_at_module_level():
    found = [line for line in house.nested_imports()
             if line.partition(":")[0] not in LAZY_IMPORTS]
    assert not found, "\n".join(found)


def test_the_walker_sees_function_level_and_relative_imports():
    graph = house.import_graph()
    assert "mtensor.modes" in graph["mtensor.dispatch"]
    assert "mtensor.comm.guard" in graph["mtensor.redistribute.execute"]
    assert any(line.startswith("mtensor.testing:") for line in house.nested_imports())
    assert house.layer_of("mtensor.ops.pointwise") < house.layer_of("mtensor.dispatch")
    assert house.layer_of("mtensor.numpy.linalg.solve") == house.layer_of("mtensor.numpy")
