"""The numpy coverage table (``mtensor/numpy/coverage.py``): every overridable numpy function
is implemented or refused with a reason, the refusals name real functions that are not
implemented, the functions the array API issue named are implemented, and the published
page is the one the table writes."""
import numpy as np

from mtensor.numpy import coverage
from tools import numpy_coverage


def test_every_overridable_function_is_implemented_or_refused():
    missing = [name for name, status, why in coverage.table() if status == "refused" and not why]
    assert not missing, f"numpy functions neither implemented nor refused: {missing}"


def test_refusals_name_functions_that_exist_and_are_not_implemented():
    functions = coverage.overridable()
    stale = [name for name in coverage.REFUSED
             if name not in functions or coverage.implemented(functions[name])]
    assert not stale, f"refused but unknown to numpy or implemented: {stale}"


def test_the_named_functions_are_implemented():
    named = [np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.broadcast_arrays,
             np.nan_to_num, np.select, np.rot90, np.diagflat, np.polyfit, np.polyval,
             np.lexsort, np.astype, np.result_type, np.isposinf, np.isneginf,
             np.linalg.vector_norm, np.linalg.multi_dot, np.unique_all, np.unique_counts,
             np.unique_inverse, np.unique_values, np.cumulative_sum, np.unstack, np.linalg.vecdot,
             np.linalg.matrix_norm, np.matrix_transpose]
    absent = [f.__name__ for f in named if not coverage.implemented(f)]
    assert not absent, absent


def test_the_published_page_is_current():
    assert numpy_coverage.PAGE.read_text() == numpy_coverage.page(), (
        "docs/reference/numpy_coverage.md is stale: run python tools/numpy_coverage.py")
