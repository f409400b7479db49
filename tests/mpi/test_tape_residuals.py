"""The gradient tape keeps what its rules read and no more (``autodiff.residuals``): a
temporary no rule reads is freed during the forward, as without a tape; a parameter's ghost
does not keep a finished step alive; tapes that follow one value at once each keep their
own ghost of it."""
import gc

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host

import mtensor as mt
from mtensor.autodiff import residuals
from mtensor.autodiff.tape import VJPS


@pytest.mark.mpi
def test_the_tape_keeps_only_the_values_its_rules_read(mesh):
    x = mt.distribute_tensor(np.linspace(-1, 1, 24).reshape(6, 4), mesh,
                             [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1))
    held = []

    def f(x):
        e = np.exp((x + 1.0) * 0.5)         # x + 1.0 and its half: read by no rule
        held.append((mt.debug.tape_bytes(), e.to_local().nbytes))
        return (e * 2.0).sum()              # e * 2.0: read by sum's rule? no: shape only
    value, g = mt.value_and_grad(f)(x)
    (kept, e_bytes), = held
    want = np.exp((np.linspace(-1, 1, 24).reshape(6, 4) + 1.0) * 0.5)
    assert_all_ranks(kept == e_bytes and np.allclose(host(g), want) and
                     np.isclose(float(value), 2 * want.sum()), f"kept {kept}, exp {e_bytes}")


@pytest.mark.mpi
def test_a_parameter_keeps_no_finished_tape_alive(mesh):
    w = mt.distribute_tensor(np.ones((4, 4)), mesh, [mt.Replicate()] * mesh.ndim)
    mt.value_and_grad(lambda w: np.tanh(w * 3.0).sum())(w)
    gc.collect()
    assert w._ghost is not None and w._ghost.tape() is None


@pytest.mark.mpi
def test_two_live_tapes_each_route_their_own_cotangents(mesh):
    """A value followed by two tapes recorded one after the other and walked back in the
    other order (a pipeline's micro-batches): each walk finds its own ghosts."""
    from mtensor.autodiff import api, tape

    w = mt.distribute_tensor(np.full((3, 3), 2.0), mesh, [mt.Replicate()] * mesh.ndim)
    recorded, outs = [], []
    for scale in (1.0, 10.0):
        t = tape.start([w])
        try:
            outs.append((np.sin(w) * scale).sum())
        finally:
            tape.stop()
        recorded.append(t)
    grads = []
    for t, out in reversed(list(zip(recorded, outs))):
        done, _ = api.walk_back(t, {t.key(out): np.ones_like(out)}, [w])
        grads.append(host(done[id(w)]))
    ok = (np.allclose(grads[0], 10 * np.cos(2.0)) and np.allclose(grads[1], np.cos(2.0)))
    assert_all_ranks(ok, f"{[g[0, 0] for g in grads]}")


def test_the_residual_table_names_ops_with_rules():
    assert set(residuals.READS) <= set(VJPS)


@pytest.mark.mpi
def test_a_write_through_a_view_into_a_parameter_an_op_read_is_refused(mesh):
    """The parameter is held as a ghost (the product reads only the constant), yet writing
    into its storage through a view made beforehand is still refused, as it was when the
    tape held the parameter itself."""
    w = mt.distribute_tensor(np.ones((4, 3)), mesh, [mt.Replicate()] * mesh.ndim)
    c = mt.distribute_tensor(np.full((4, 3), 2.0), mesh, [mt.Replicate()] * mesh.ndim)
    view = w[0:2]

    def f(w):
        a = (w * c).sum()
        view[...] = 5.0
        return a + (w * w).sum()
    with pytest.raises(TypeError, match="writes in place into a DTensor the gradient"):
        mt.value_and_grad(f)(w)


@pytest.mark.mpi
def test_many_live_tapes_follow_one_tensor(mesh):
    from mtensor.autodiff import tape

    w = mt.distribute_tensor(np.ones((2, 2)), mesh, [mt.Replicate()] * mesh.ndim)
    tapes = [tape.Tape([w]) for _ in range(3000)]
    assert all(t.follows(w) for t in tapes[::500])
    del tapes
    gc.collect()
    assert tape.Tape([w]).follows(w) and w._ghost.prev is None
