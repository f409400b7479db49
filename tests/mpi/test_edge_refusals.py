"""What mtensor refuses, and how (issue 33): a structured dtype up front on every rank; a
numpy attribute it lacks as an AttributeError (``hasattr``/``getattr`` work) that still
names the way out; stacked linalg over an unevenly split batch passes the check mode (the
blocks differ in shape by design)."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, random_array

import mtensor as mt
from mtensor import Replicate, Shard


@pytest.mark.mpi
def test_a_structured_dtype_is_refused_by_every_constructor(mesh):
    data = np.zeros(7, dtype=[("age", "i4"), ("w", "f8")])
    R = [Replicate()] * mesh.ndim
    for make in (lambda: mt.distribute_tensor(data, mesh, R),
                 lambda: mt.DTensor.from_local(data, mesh, R)):
        with pytest.raises(TypeError, match=r"structured dtype .* data\['age'\]"):
            make()


@pytest.mark.mpi
def test_missing_numpy_attributes_are_attribute_errors(mesh):
    x = mt.distribute_tensor(np.arange(6.0), mesh, [Replicate()] * mesh.ndim)
    assert not hasattr(x, "flags") and getattr(x, "ctypes", None) is None
    with pytest.raises(TypeError, match="full_tensor"):        # still the helpful message
        x.flags
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        x.no_such_name


@pytest.mark.mpi
@pytest.mark.parametrize("fn", [np.linalg.det, np.linalg.eigvalsh, np.linalg.pinv,
                                lambda a: np.linalg.eigh(a)[0]])
def test_stacked_linalg_on_an_uneven_batch_passes_the_check_mode(mesh, fn):
    a = random_array((5, 3, 3), seed=4)
    a = a + np.swapaxes(a, -1, -2) + 6 * np.eye(3)
    A = mt.distribute_tensor(a, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    mt.set_checks(True)
    try:
        got = host(fn(A))
    finally:
        mt.set_checks(False)
    assert_all_ranks(np.allclose(got, fn(a)), "stacked linalg under the check mode")
