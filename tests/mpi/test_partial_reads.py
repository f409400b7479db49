"""Reading a value never changes it (issue 33, item 4): a Partial operand keeps its
placements and its block after any op reads it, an in-place op's other operand too, while
the reduced form an op made is still reused by later reads (one collective, not two) until
the value's owner writes it."""
import operator

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, dtensor_of, host, random_array

import mtensor as mt
from mtensor import Partial, Replicate, Shard


def _snapshot(x):
    return x.placements, host(x.to_local()).tobytes()


def _first_shard(mesh):
    return [Shard(0)] + [Replicate()] * (mesh.ndim - 1)


@pytest.mark.mpi
def test_the_issue_repro_a_partial_operand_is_unchanged(mesh):
    a = dtensor_of(np.ones(8), mesh, _first_shard(mesh))
    p = dtensor_of(np.arange(8.0), mesh, [Partial()] * mesh.ndim, seed=3)
    was = _snapshot(p)
    y = a + p
    assert_all_ranks(_snapshot(p) == was, f"p changed to {p.placements}")
    assert_all_ranks(np.allclose(host(y), 1 + np.arange(8.0)), "a + p")
    assert_all_ranks(np.allclose(host(p), np.arange(8.0)), "p's value")


@pytest.mark.mpi
@pytest.mark.parametrize("op", [operator.iadd, operator.isub, operator.imul,
                                operator.itruediv])
def test_inplace_ops_leave_their_partial_operand_as_it_was(mesh, op):
    x = random_array((5, 3), seed=1)
    y = np.abs(random_array((5, 3), seed=2)) + 1.0
    for target in ([Replicate()] * mesh.ndim, _first_shard(mesh), [Partial()] * mesh.ndim):
        X = dtensor_of(x, mesh, target)
        P = dtensor_of(y, mesh, [Partial()] * mesh.ndim, seed=5)
        was = _snapshot(P)
        op(X, P)
        assert_all_ranks(_snapshot(P) == was, f"{op.__name__} into {target}: P changed")
        assert_all_ranks(X.placements == tuple(target), f"{op.__name__}: target moved")
        assert_all_ranks(np.allclose(host(X), op(x.copy(), y)), f"{op.__name__} {target}")


@pytest.mark.mpi
def test_the_reduced_form_is_reused_until_the_owner_writes(mesh):
    """Two reads that need it whole reduce once; a write drops the reduced form, and the
    next read sees the written value (a stale twin would show the old one)."""
    if mesh.size() == 1:
        pytest.skip("one rank: partial terms need no collective")
    a = dtensor_of(random_array((6, 4), seed=1), mesh, _first_shard(mesh))
    p = dtensor_of(np.ones((6, 4)), mesh, [Partial()] * mesh.ndim, seed=7)
    with mt.CommDebugMode() as comm:
        first = np.exp(p)
    with mt.CommDebugMode() as again:
        second = a + p
    assert_all_ranks(comm.get_total_counts() > 0 and again.get_total_counts() == 0,
                     f"the second read ran {again.get_comm_counts()}")
    assert_all_ranks(np.allclose(host(first), np.e) and np.allclose(host(second), host(a) + 1),
                     "reads of p")
    p += 1.0                       # the owner writes: the reduced form is stale now
    assert_all_ranks(np.allclose(host(a + p), host(a) + 2), "read after a write")
    p[0] = 10.0
    assert_all_ranks(np.allclose(host(a * p)[0], host(a)[0] * 10), "read after setitem")


@pytest.mark.mpi
def test_to_local_after_a_read_returns_the_terms_the_user_made(mesh):
    """The block a user gave is the block ``to_local`` returns, after any number of reads;
    writing that block in place is seen by the next op (the reduced form is dropped)."""
    terms = random_array((4, 3), seed=mesh.get_rank() + 11)
    p = mt.DTensor.from_local(terms.copy(), mesh, [Partial()] * mesh.ndim)
    whole = mesh.comm.allreduce(terms)
    _ = np.exp(p)
    _ = p.sum(axis=0)
    block = p.to_local()
    assert_all_ranks(np.array_equal(host(block), terms), "to_local after reads")
    block *= 2
    assert_all_ranks(np.allclose(host(p * 1.0), 2 * whole), "the written block was not seen")
